"""The 64 x 64 triangular solve with panels of four rows (KILN_TRSM_PANEL8=0, the kernel in
use) against panels of eight (1) in one process: bits and error against fp64, then time
against torch. Run on the GPU machine by scripts/ab-trsm-panel8.sh."""
import os, sys
sys.path.insert(0, "bench")
import torch
import kiln
from bench import time_us

MODES = ["0", "1"]
torch.manual_seed(0)
n = 64
stream = torch.cuda.current_stream()
for batch, kk in ((4096, 8), (6000, 8), (100, 5), (2113, 8), (1, 8), (3000, 3)):
    L = torch.randn(batch, n, n, device="cuda").tril() / n ** 0.5 + 2 * torch.eye(n, device="cuda")
    R = torch.randn(batch, n, kk, device="cuda")
    full = L + torch.triu(torch.randn(batch, n, n, device="cuda"), 1)  # garbage off the triangle: never read
    for upper in (False, True):
        for unit in (False, True):
            A = kiln.from_dlpack(full if not upper else full.transpose(-1, -2).contiguous())
            want = torch.linalg.solve_triangular(torch.from_dlpack(A).double(), R.double(), upper=upper,
                                                 unitriangular=unit)
            outs = []
            for mode in MODES:
                os.environ["KILN_TRSM_PANEL8"] = mode
                outs.append(torch.from_dlpack(kiln.linalg.solve_triangular(A, kiln.from_dlpack(R), upper=upper,
                                                                           unitriangular=unit)).clone())
            errs = " ".join(f"{(o.double() - want).abs().max().item() / want.abs().max().item():.1e}" for o in outs)
            print(f"batch {batch} k {kk} upper={upper} unit={unit} bit-equal: {torch.equal(outs[0], outs[1])} "
                  f"rel err {errs}")
for batch in (4096, 2048, 8192, 512):
    L = torch.randn(batch, n, n, device="cuda").tril() / n ** 0.5 + 2 * torch.eye(n, device="cuda")
    R = torch.randn(batch, n, 8, device="cuda")
    kL, kR = kiln.from_dlpack(L), kiln.from_dlpack(R)
    for rnd in range(2 if batch == 4096 else 1):
        line = []
        for mode in MODES + MODES[::-1]:
            os.environ["KILN_TRSM_PANEL8"] = mode
            us = time_us(lambda: kiln.linalg.solve_triangular(kL, kR, upper=False), 30, stream)
            line.append(f"{mode}:{us:6.2f}")
        tus = time_us(lambda: torch.linalg.solve_triangular(L, R, upper=False), 30, stream)
        print(f"batch {batch} round {rnd}: " + "  ".join(line) + f"  torch {tus:6.2f}", flush=True)
U = kiln.from_dlpack(torch.randn(4096, n, n, device="cuda").triu() / n ** 0.5 + 2 * torch.eye(n, device="cuda"))
R = kiln.from_dlpack(torch.randn(4096, n, 8, device="cuda"))
line = []
for mode in MODES + MODES[::-1]:
    os.environ["KILN_TRSM_PANEL8"] = mode
    line.append(f"{mode}:{time_us(lambda: kiln.linalg.solve_triangular(U, R, upper=True), 30, stream):6.2f}")
print("upper 4096: " + "  ".join(line))
os.environ["KILN_TRSM_PANEL8"] = "0"
