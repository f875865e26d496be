# Keeps card 0 busy with bf16 matrix products for 15 s while holding 8 GiB
# of its memory: the load TestRealLoad (make gpu-check) expects the agent's
# reads to show. Needs PyTorch with CUDA.
import time

import torch

held = torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
start = time.time()
while time.time() - start < 15:
    for _ in range(50):
        a @ a
    torch.cuda.synchronize()
print("load done")
