// The CUDA runtime calls that core code (streams, events) needs, behind plain
// pointers so that core compiles without CUDA headers. Implemented in
// src/cuda/runtime.cpp, or by src/core/no_cuda.cpp as errors.
#pragma once

namespace kiln::cuda_backend {

void* stream_create(int device, int priority);
void stream_destroy(int device, void* stream);
void stream_synchronize(int device, void* stream);
bool stream_query(int device, void* stream);
void stream_wait_event(int device, void* stream, void* event);
void* event_create(int device, bool timing);
void event_destroy(int device, void* event);
void event_record(int device, void* event, void* stream);
void event_synchronize(void* event);
bool event_query(void* event);
float event_elapsed_ms(void* start, void* end);
// CUDA graphs: capture (relaxed mode) of what is queued on `stream`, then one launch per replay.
void graph_capture_begin(int device, void* stream);
void* graph_capture_end(int device, void* stream);  // the instantiated graph
void graph_launch(int device, void* exec, void* stream);
void graph_destroy(int device, void* exec);

}  // namespace kiln::cuda_backend
