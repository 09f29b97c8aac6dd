"""The --device argument shared by the benchmark scripts: auto, cpu, cuda or cuda:N."""

from __future__ import annotations

import argparse

import torch


def resolve_device(name: str, parser: argparse.ArgumentParser) -> torch.device:
    """'auto' picks cuda when torch sees a GPU; a CUDA device is made current."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            parser.error("--device cuda, but torch sees no CUDA device")
        index = device.index if device.index is not None else torch.cuda.current_device()
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
    return device
