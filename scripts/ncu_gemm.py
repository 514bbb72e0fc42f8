"""One bf16 GEMM (8192 x 8192 x 8192) for Nsight Compute's roofline section
(scripts/device_check.sh): ncu skips the first two launches (warm-up) and profiles the third;
`roofline op matmul --m 8192 --k 8192 --n 8192 --hw h200` is our bound for it."""

import torch

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(4):
    c = a @ b
torch.cuda.synchronize()
print(float(c[0, 0]))
