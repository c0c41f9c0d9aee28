"""Training entry point: `python train/fit.py COMPONENT -c CONFIG [LightningCLI options]`.

The same as `memnets fit COMPONENT ...` (memnets.training.commands.fit), as a script for launchers (SLURM, torchrun,
Lightning's own DDP launcher) that want a file to run. The library never imports train/.
"""

import sys

from memnets.training.commands.fit import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
