"""``python -m crossview`` (also what ``torchrun -m crossview train CONFIG`` runs)."""

from crossview.cli.app import main

main()
