"""Training: losses, the trainer loop, torch.distributed support and checkpoints."""
