"""A complex-valued network trained in Python the PyTorch way: a phasor.nn.Module,
phasor.optim.AdamW, zero_grad / backward / step, mini-batches by slicing.

The student learns a teacher of the same shape from 256 noiseless examples;
the script prints the loss as it falls and exits non-zero (printing MISMATCH)
unless the final loss is under 2% of the first.

    PYTHONPATH=build/python python3 docs/examples/train_tiny.py
"""
import sys

import phasor


class ComplexNet(phasor.nn.Module):
    """Two complex linear maps with a gate on the modulus between them."""

    def __init__(self, seed):
        super().__init__()
        self.inner = phasor.nn.Linear(4, 16, dtype=phasor.complex64, seed=seed)
        self.outer = phasor.nn.Linear(16, 2, dtype=phasor.complex64, seed=seed + 1)

    def forward(self, z):
        h = self.inner(z)
        return self.outer(h * phasor.sigmoid(abs(h)))  # keeps each phase, scales each modulus


def squared_error(prediction, target):
    d = prediction - target
    return (d.real * d.real + d.imag * d.imag).mean()


def main():
    teacher, student = ComplexNet(seed=1), ComplexNet(seed=7)
    inputs = phasor.randn([256, 4], dtype=phasor.complex64, seed=3)
    with phasor.no_grad():
        targets = teacher(inputs)

    optimizer = phasor.optim.AdamW(student.parameters(), lr=1e-2, weight_decay=0.0)
    losses = []
    for step in range(300):
        start = (step * 32) % 256
        batch, wanted = inputs[start:start + 32], targets[start:start + 32]
        optimizer.zero_grad()
        loss = squared_error(student(batch), wanted)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == 299:
            print(f"step {step:3d}  loss {losses[-1]:.5f}")

    with phasor.no_grad():
        final = squared_error(student(inputs), targets).item()
    print(f"loss on all 256 examples: {final:.5f} (first batch: {losses[0]:.5f})")
    if not final < 0.02 * losses[0]:
        print(f"MISMATCH: the loss fell only from {losses[0]:.5f} to {final:.5f}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
