"""`flashsim demo train`: a tiny model trained on the GPU with flashsim's kernels and with the standard baseline."""

import click

from sim.cli import estimate, options
from sim.cli.options import console, emit_json
from sim.core.atomic_file import write_text
from sim.core.format import count

MIN_STEPS = 6  # gpu.lab.train: more than its WARMUP_STEPS (5), the steps that compile the kernels and are not timed


@click.group("demo")
def demo_group() -> None:
    """Demonstrations on a GPU."""


@demo_group.command("train")
@click.option(
    "--steps", type=options.Count(MIN_STEPS, options.MAX_SIZE), default=300, show_default=True,
    help=f"Optimizer steps per run (the first {MIN_STEPS - 1} are not timed).",
)  # fmt: skip
@options.dtype("bf16", choices=("fp16", "bf16"))
@options.output_file("--plot", "plot_path", "Where the two loss curves go (SVG).", default="train-loss.svg")
@options.JSON_REPORT
@click.pass_context
def train_command(ctx, steps, dtype, plot_path, json_path) -> None:
    """Train a tiny causal language model twice, flashsim FlashAttention and standard attention: loss curves, tokens/s."""
    what = f"training {count(steps)} steps with each attention, at the pace of the recorded H100 run,"
    estimate.guard(ctx, estimate.training, what, [], limit=estimate.BENCH_LIMIT_SECONDS, steps=steps)
    from gpu.lab import plot, render_train, train

    config = train.TrainConfig(steps=steps, dtype={"fp16": "float16", "bf16": "bfloat16"}[dtype])
    report = train.train(
        config,
        progress=lambda impl, step, loss: console.print(f"{impl}: step {step}, loss {loss:.4f}", style="dim"),
        command=options.command_line(),
    )
    chart = plot.line_chart(report["losses"], title="tiny causal LM: training loss", x_label="step", y_label="loss")
    write_text(plot_path, chart)
    if not emit_json(report, json_path, indent=1):
        console.print(render_train.training_table(report))
        console.print(f"loss curves: {plot_path}", markup=False)


COMMANDS = (demo_group,)
