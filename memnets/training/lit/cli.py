"""LightningCLI for `memnets fit COMPONENT -c CONFIG [LightningCLI options]` (memnets.training.commands.fit).

Each trainable component is one registry entry, COMPONENT -> (LightningModule, LightningDataModule)
as import strings, so that `memnets fit encoder` imports only the encoder's code. Adding a component
is one line in ``COMPONENTS``. Everything after the component name goes to LightningCLI's ``fit``
subcommand, except that each config (``-c``/``--config``) may be a packaged config name as well as a
file (see :mod:`memnets.training.configs`): ``-c encoder/cpu --trainer.max_epochs 2 --model.lr 3e-5`` ...
``memnets fit encoder --help`` lists every option.
"""

from __future__ import annotations

import importlib
import sys
import warnings

COMPONENTS: dict[str, tuple[str, str]] = {
    "encoder": ("memnets.training.lit.encoder:EncoderModule", "memnets.training.lit.data:RetrievalDataModule"),
    "encoder_top": (
        "memnets.training.lit.encoder_top:TopLayersEncoderModule",
        "memnets.training.lit.data:RetrievalDataModule",
    ),
    "importance": ("memnets.training.lit.heads:ImportanceModule", "memnets.training.lit.heads:ImportanceDataModule"),
    "gate": ("memnets.training.lit.heads:GateModule", "memnets.training.lit.heads:GateDataModule"),
    "supersession": (
        "memnets.training.lit.supersession:ChangeJudgeModule",
        "memnets.training.lit.supersession:ChangeJudgeDataModule",
    ),
}

# COMPONENT -> (source, target) arguments linked once the DataModule exists: a head is built in its
# module's __init__ for the embedding size of the DataModule's encoder.
LINKS: dict[str, tuple[tuple[str, str], ...]] = {
    "importance": (("data.dim", "model.dim"),),
    "gate": (("data.dim", "model.dim"),),
}


def _load(target: str):
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def resolve_config_args(args: list[str]) -> list[str]:
    """``args`` with the value of every ``-c``/``--config`` replaced by what jsonargparse reads: the
    config's file path, or the merged YAML of a config with a ``base:`` (see :mod:`memnets.training.configs`)."""
    from memnets.training.configs import config_argument

    resolved = list(args)
    for i, arg in enumerate(args):
        if arg in {"-c", "--config"} and i + 1 < len(args):
            resolved[i + 1] = config_argument(args[i + 1])
        elif arg.startswith("--config="):
            resolved[i] = f"--config={config_argument(arg.partition('=')[2])}"
    return resolved


def build_cli(component: str, args: list[str], run: bool = True):
    """The LightningCLI of ``component`` parsed from ``args`` (``fit`` options, without the word ``fit``).

    With ``run=False`` the Trainer, model and datamodule are built but nothing is fitted (tests,
    notebooks); with ``run=True`` it fits.
    """
    from lightning.pytorch.cli import LightningCLI

    from memnets.training.lit.logs import adopt_lightning_logging
    from memnets.training.lit.precision import apply_cpu_fit_precision
    from memnets.training.lit.threads import TorchThreads
    from memnets.training.lit.time_estimate import FitTimeEstimate

    adopt_lightning_logging()  # one line per Lightning record, and no tips

    # LightningCLI warns when args differ from sys.argv; here they differ by design (`memnets fit X`).
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter")

    if component not in COMPONENTS:
        raise ValueError(f"unknown component {component!r}; expected one of {sorted(COMPONENTS)}")
    module_target, data_target = COMPONENTS[component]
    links = LINKS.get(component, ())

    class LinkedCLI(LightningCLI):
        def add_arguments_to_parser(self, parser) -> None:
            # in every fit, whatever its callbacks: `torch_threads: {per_process: N}` / --torch_threads.per_process
            parser.add_lightning_class_args(TorchThreads, "torch_threads")
            # and the expected time on this machine after a few steps: `time_estimate: {budget_minutes: ...}`
            parser.add_lightning_class_args(FitTimeEstimate, "time_estimate")
            for source, target in links:
                parser.link_arguments(source, target, apply_on="instantiate")

        def before_instantiate_classes(self) -> None:
            # bf16 autocast asked of a CPU without native bf16 runs in float32 (memnets.training.lit.precision)
            config = self.config[self.subcommand] if self.subcommand else self.config
            apply_cpu_fit_precision(config.trainer)

        def _add_subcommands(self, parser, **kwargs) -> None:
            super()._add_subcommands(parser, **kwargs)
            # a user types `memnets fit COMPONENT`: LightningCLI's own `fit` subcommand is implied, so
            # its usage line says what to type (jsonargparse would write "... [options] fit")
            for subparser in parser._subcommands_action._name_parser_map.values():
                subparser.prog = f"memnets fit {component}"

    return LinkedCLI(
        _load(module_target),
        _load(data_target),
        args=["fit", *resolve_config_args(args)] if run else resolve_config_args(args),
        run=run,
        save_config_kwargs={"overwrite": True},
        parser_kwargs={"prog": f"memnets fit {component}"},
        parser_class=one_line_parser(),
    )


def one_line_parser():
    """LightningCLI's parser class, whose usage errors are one line, ``memnets fit COMPONENT: error: ...``, as
    every other memnets command's (memnets.console.CommandParser): jsonargparse prints the whole usage block
    (84 lines for `memnets fit encoder -c encoder/cpu --bogus`) above the message. Errors it raises to be caught (exit_on_error off) stay as they were."""
    from lightning.pytorch.cli import LightningArgumentParser

    class OneLineParser(LightningArgumentParser):
        def error(self, message: str, ex: Exception | None = None):
            if not self.exit_on_error:
                return super().error(message, ex)
            parser = getattr(ex, "subcommand_parser", None) or self
            sys.stderr.write(f"{parser.prog}: error: {message}\n")
            self.exit(2)

    return OneLineParser
