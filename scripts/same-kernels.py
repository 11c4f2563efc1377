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

Exit status 0 when every body matches, 1 otherwise (with the counts that differ).
"""
import collections
import hashlib
import struct
import sys


def text_sections(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF cubin")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    for name, _type, _flags, _addr, offset, size in headers:
        label = data[names_at + name:data.index(b"\0", names_at + name)].decode()
        if label.startswith(".text."):
            yield hashlib.sha1(data[offset:offset + size]).hexdigest()


def bodies(paths):
    counts = collections.Counter()
    for p in paths:
        counts.update(text_sections(p))
    return counts


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    before, after = bodies(argv[:cut]), bodies(argv[cut + 1:])
    print(f"kernels before {sum(before.values())}, after {sum(after.values())}; "
          f"bodies only before {sum((before - after).values())}, only after {sum((after - before).values())}")
    return 0 if before == after else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
