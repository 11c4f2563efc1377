#!/usr/bin/env python3
"""Whether two sets of CUDA cubins hold the same machine code, kernel for kernel.

For refactors that should change no kernel (code moved between files, a loop
pulled into a helper): compile the touched .cu files before and after to cubins
(nvcc -cubin is deterministic), then compare their .text sections. Names are not
compared (a kernel's anonymous-namespace tag changes with its file), only the
multiset of code bodies, so a kernel that moved files still matches.

  nvcc -DKILN_WITH_CUDA=1 -Iinclude -Isrc -O3 -DNDEBUG --expt-relaxed-constexpr -std=c++20 \\
       --generate-code=arch=compute_90a,code=[sm_90a] -x cu -cubin src/cuda/X.cu -o /tmp/X.before.cubin
  scripts/same-kernels.py /tmp/X.before.cubin -- /tmp/X.after.cubin /tmp/Y.after.cubin

Each body is also paired with its kernel's static shared memory (its .nv.shared
section). That can change with no change of code: in December 2026 every kernel of
grouped_mm.cu had a 1 KB section while the file held the TMA kernels, and the ones
moved to files without them have none. Exit status 0 when bodies and shared sizes
both match, 1 otherwise (with the counts that differ).
"""
import collections
import hashlib
import struct
import sys


def kernels(path):
    """(hash of the kernel's code, its static shared bytes) for each kernel of a cubin."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF cubin")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    sections = {}
    for name, _type, _flags, _addr, offset, size in headers:
        sections[data[names_at + name:data.index(b"\0", names_at + name)].decode()] = (offset, size)
    for label, (offset, size) in sections.items():
        if label.startswith(".text."):
            shared = sections.get(".nv.shared." + label[len(".text."):], (0, 0))[1]
            yield hashlib.sha1(data[offset:offset + size]).hexdigest(), shared


def tally(paths):
    code, with_shared = collections.Counter(), collections.Counter()
    for p in paths:
        for body, shared in kernels(p):
            code[body] += 1
            with_shared[body, shared] += 1
    return code, with_shared


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    (code_b, full_b), (code_a, full_a) = tally(argv[:cut]), tally(argv[cut + 1:])
    print(f"kernels before {sum(code_b.values())}, after {sum(code_a.values())}; "
          f"bodies only before {sum((code_b - code_a).values())}, only after {sum((code_a - code_b).values())}; "
          f"same body, other static shared memory: {sum((full_b - full_a).values()) - sum((code_b - code_a).values())}")
    return 0 if full_b == full_a else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
