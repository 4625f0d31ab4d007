"""`torchrun --standalone --nproc_per_node=N -m training.train --data SHARDS --out RUN`: train a small
GPT on refinery shards with DDP or FSDP, resumable exactly from atomic checkpoints."""
from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from common import files
from common.settings import ConfigError
from training import checkpoint
from training.config import TrainConfig, parse
from training.data import DataConfig, DataError, PhasedStream, ShardStream, StreamState
from training.distributed import (
    Dist,
    barrier,
    choose_threads,
    full_state,
    gather_to_main,
    init,
    load_full_state,
    parallelize,
    shutdown,
    use_cpu_threads,
)
from training.evaluate import eval_sets, evaluate
from training.measure import CommCounter, state_bytes
from training.metrics import Metrics, summarize
from training.model import GPT, flops_per_token
from training.spikes import SpikeGuard, TrainingDiverged
from training.step import accumulation_step, clip_gradients, lr_at, make_scaler
from training.stopping import Control, SignalFlag, Stopped, stop_message
from training.tokenizer import load_tokenizer
from training.tokens import TokenStream, is_token_dir, token_tokenizer


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW; no weight decay on biases, LayerNorm and (1-D) parameters, as in GPT-2/nanoGPT."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))


class FaultInjector:
    """--inject-fault, for testing the spike guard: the loss of this process's k-th update attempt is
    scaled by 1e3 (spike) or made NaN, through a hook on the logits. Keyed by attempts, not steps,
    which a rollback rewinds."""

    def __init__(self, faults: Sequence[tuple[int, str]]) -> None:
        self._faults: dict[int, str] = {}
        for attempt, kind in faults:
            self._faults.setdefault(attempt, kind)

    @contextlib.contextmanager
    def armed(self, model: torch.nn.Module, attempt: int) -> Iterator[None]:
        kind = self._faults.get(attempt)
        if kind is None:
            yield
            return
        factor = float("nan") if kind == "nan" else 1e3
        handle = model.register_forward_hook(lambda module, args, out: out * factor)
        try:
            yield
        finally:
            handle.remove()


class Trainer:
    def __init__(self, cfg: TrainConfig, env: Dist) -> None:
        self.cfg, self.env = cfg, env
        self.tokenizer = token_tokenizer(cfg.tokens) if cfg.tokens else load_tokenizer(cfg.tokenizer)
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        self.model_cfg = cfg.model_config(self.tokenizer.vocab_size)
        core = GPT(self.model_cfg)
        self.n_params = core.num_parameters()
        self.flops_per_token = flops_per_token(self.model_cfg, self.n_params - core.pos_emb.weight.numel())
        self.block_params = sum(p.numel() for p in core.blocks.parameters())
        self.model = parallelize(core, cfg.strategy, env, cfg.grad_checkpoint)
        # bytes held and sent, measured on the first applied step (see training/measure.py)
        self.comm = CommCounter().attach(self.model, cfg.strategy) if env.active else None
        self.measured: dict[str, Any] | None = None
        self.optimizer = build_optimizer(self.model, cfg)
        decay = cfg.decay_steps()
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_at(s, 1.0, cfg.warmup, cfg.steps, cfg.min_lr_ratio, cfg.schedule, decay))
        self.scaler = make_scaler(cfg.precision, env.device)
        self.loader = PhasedStream(self._stream(cfg.tokens or cfg.data),
                                   self._stream(cfg.anneal_data) if cfg.anneal_data else None, cfg.anneal_start())
        self.eval_sets = eval_sets(cfg.tokens or cfg.data, cfg.eval_data, self.tokenizer, cfg.seq_len,
                                   cfg.eval_tokens, cfg.text_field) if cfg.eval_every else []
        self.evals: list[dict[str, Any]] = []
        self.guard = SpikeGuard(cfg.spike, warmup=cfg.warmup, clip=cfg.clip)
        self.last_applied = 0   # last step whose update was applied
        self.last_saved = 0     # step of the last checkpoint written (or resumed from)
        self.first_loss: float | None = None  # a resumed run's first logged loss (its summary starts there)
        self.step = 0
        self.ckpt_dir = os.path.join(cfg.out, "checkpoints")
        # per-rank streams for dropout etc.; restored from checkpoints on resume
        random.seed(cfg.seed + env.rank)
        np.random.seed(cfg.seed + env.rank)
        torch.manual_seed(cfg.seed + 1 + env.rank)

    def _stream(self, folder: str) -> StreamState:
        cfg = self.cfg
        data_cfg = DataConfig(folder, cfg.seq_len, cfg.micro_batch, seed=cfg.seed, mode=cfg.mode,
                              text_field=cfg.text_field, num_workers=cfg.workers,
                              verify_checksums=cfg.verify_checksums)
        kind = TokenStream if is_token_dir(folder) else ShardStream
        return StreamState(kind(data_cfg, self.tokenizer, self.env.rank, self.env.world_size))

    def evaluate(self, metrics: Metrics) -> None:
        """Validation losses of every evaluation set at this step (all ranks take part)."""
        results = {s.name: evaluate(self.model, s, self.cfg.micro_batch, self.env.rank, self.env.world_size,
                                    self.cfg.precision, self.env.device, self.tokenizer.pad_id)
                   for s in self.eval_sets}
        record = {"step": self.step, "eval": results}
        self.evals.append(record)
        metrics.write(record)

    # -- checkpoints ---------------------------------------------------------------------------
    def save(self) -> None:
        model_state, optim_state = full_state(self.model, self.optimizer)  # collective
        data = gather_to_main(self.loader.state_dict(), self.env)
        rng = gather_to_main(checkpoint.rng_state(), self.env)
        if self.env.main:
            checkpoint.save(self.ckpt_dir, {
                "step": self.step, "model": model_state, "optimizer": optim_state,
                "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict() if self.scaler else None,
                "data": data, "rng": rng, "world_size": self.env.world_size, "strategy": self.cfg.strategy,
                "model_config": dict(vars(self.model_cfg)), "tokenizer": self.tokenizer.describe(),
            }, keep=self.cfg.keep_checkpoints)
        barrier()

    def restore(self, with_data: bool = True) -> int:
        """Load the latest checkpoint into model, optimizer, schedule (and data position, RNG)."""
        state = checkpoint.load(self.ckpt_dir)
        saved_shape = state.get("model_config", {})
        if saved_shape and saved_shape != dict(vars(self.model_cfg)):
            raise checkpoint.CheckpointError(f"checkpoint model {saved_shape} differs from this run's {vars(self.model_cfg)}")
        load_full_state(self.model, self.optimizer, state["model"], state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if with_data:
            same_world = state.get("world_size") == self.env.world_size
            mine = state["data"][self.env.rank] if same_world else state["data"][0]
            self.loader.load_state_dict(mine)
            if same_world:
                checkpoint.set_rng_state(state["rng"][self.env.rank])
        self.step = int(state["step"])
        return self.step

    # -- the loop ------------------------------------------------------------------------------
    def train(self, stop_after: int | None = None, faults: FaultInjector | None = None,
              signals: SignalFlag | None = None) -> list[dict[str, Any]]:
        """Steps until cfg.steps (or `stop_after`, as a crash would); returns the per-step records. Raises Stopped
        after saving a checkpoint when `signals` noted SIGTERM/SIGINT on any rank."""
        cfg, faults = self.cfg, faults or FaultInjector(())
        metrics = Metrics(os.path.join(cfg.out, "metrics.jsonl"), cfg.steps, self.env.main, cfg.tensorboard)
        history: list[dict[str, Any]] = []
        self._start(metrics)
        self.control = Control(signals or SignalFlag(), cfg.checkpoint_minutes, self.env.world_size)
        self.model.train()
        attempt = 0
        while self.step < cfg.steps:
            attempt += 1
            record = self.train_step(faults, attempt)
            history.append(record)
            metrics.write(record, show=self.step % cfg.log_every == 0 or self.step == cfg.steps or record["skipped"])
            if record["skipped"] and self.guard.skipped(self.step) and self._roll_back(metrics):
                continue  # back at a saved step: nothing new to save
            if self.eval_sets and (self.step % cfg.eval_every == 0 or self.step == cfg.steps):
                self.evaluate(metrics)
            signum, by_clock = self.control.decide()  # the same answer on every rank
            stopping = signum is not None and self.step < cfg.steps  # a finished run just finishes
            self._checkpoint_if_due(metrics, now=stopping or by_clock)
            if stopping:
                metrics.write({"event": "stopped", "step": self.step, "signal": signum, "checkpoint": self.last_saved})
                metrics.close()
                raise Stopped(signum, self.step, self.last_saved)
            if stop_after is not None and self.step >= stop_after:
                metrics.write({"event": "stopped", "step": self.step, "why": "--stop-after"})
                break
        metrics.close()
        return history

    def _start(self, metrics: Metrics) -> None:
        """Resume from the latest checkpoint, or refuse a folder that holds one; say what runs."""
        cfg, env = self.cfg, self.env
        if cfg.resume:
            self.restore()
            self.last_applied = self.last_saved = self.step
            self.first_loss = metrics.forget_after(self.step)  # the steps after it are trained (and logged) again
            metrics.write({"event": "resumed", "step": self.step, "from": self.ckpt_dir})
        elif checkpoint.existing(self.ckpt_dir):
            raise checkpoint.CheckpointError(f"{self.ckpt_dir} already holds checkpoint files "
                                             f"({', '.join(checkpoint.existing(self.ckpt_dir)[:3])}): pass --resume "
                                             "to continue, --overwrite to start over, or choose another --out")
        if env.main:
            print(f"[train] {self.n_params:,} parameters, {env.world_size} rank(s) {cfg.strategy} on "
                  f"{env.device.type}, {cfg.precision}, {len(self.loader.stream.units)} data units", flush=True)
            if self.loader.anneal is not None:
                print(f"[train] anneal phase: steps {self.loader.switch_after + 1}-{cfg.steps} draw from "
                      f"{cfg.anneal_data} ({len(self.loader.anneal.stream.units)} units); LR schedule {cfg.schedule}",
                      flush=True)
            if self.eval_sets:
                print(f"[train] validation loss every {cfg.eval_every} steps on " + ", ".join(
                    f"{s.name} ({s.tokens:,} tokens)" for s in self.eval_sets), flush=True)
            elif cfg.eval_every:
                print(f"[train] no validation loss: {cfg.tokens or cfg.data} has no valid/ split with text "
                      "(`refinery run --holdout-fraction F` writes one) and no --eval-data was given", flush=True)

    def train_step(self, faults: FaultInjector, attempt: int) -> dict[str, Any]:
        """One update attempt: accumulate, clip, apply unless the spike guard objects, advance."""
        cfg, env = self.cfg, self.env
        started = time.perf_counter()
        if self.comm and self.measured is None:
            self.comm.reset()
        phase = self.loader.phase(self.step)
        batches = [self.loader.next(self.step) for _ in range(cfg.grad_accum)]
        with faults.armed(self.model, attempt):
            result = accumulation_step(self.model, batches, env.world_size, cfg.precision, env.device, self.scaler)
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        grad_norm = clip_gradients(self.model, cfg.clip)
        reason = self.guard.check(result.loss, grad_norm)
        self.guard.observe(result.loss, grad_norm, self.step + 1)
        lr = self.optimizer.param_groups[0]["lr"]
        if reason is None:
            if self.scaler:
                self.scaler.step(self.optimizer)
            else:
                self.optimizer.step()
            self.last_applied = self.step + 1
            if self.measured is None:
                self._measure()
        if self.scaler:
            self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        elapsed = time.perf_counter() - started
        record = {"step": self.step, "loss": result.loss, "grad_norm": grad_norm, "lr": lr,
                  "tokens": result.tokens, "tokens_per_s": result.tokens / elapsed, "seconds": elapsed,
                  "skipped": reason is not None, "phase": phase}
        if reason:
            record["skip_reason"] = reason
        return record

    def _checkpoint_if_due(self, metrics: Metrics, now: bool = False) -> None:
        """Every checkpoint_every steps, at the last step, and `now` (a signal, the clock)."""
        cfg = self.cfg
        if self.step % cfg.checkpoint_every and self.step != cfg.steps and not now:
            return
        if self.last_applied > self.last_saved or self.step == cfg.steps:
            self.save()
            self.last_saved = self.step
            self.control.saved()
        else:  # weights unchanged since the last checkpoint: saving them would pass for progress
            metrics.write({"event": "checkpoint skipped", "step": self.step,
                           "why": f"no update applied since step {self.last_saved}"})

    def _measure(self) -> None:
        """After the first applied update: gradients and optimizer states exist, one step was sent."""
        self.measured = {"state": state_bytes(self.model, self.optimizer),
                         "comm": self.comm.snapshot() if self.comm else {"bytes": {}, "calls": {}}}
        if self.comm and self.cfg.strategy == "fsdp":
            self.comm.detach()  # FSDP counting wraps torch.distributed functions: only for one step

    def _roll_back(self, metrics: Metrics) -> bool:
        """Repeated spikes: reload the last checkpoint's weights, keep the data position (so the
        batches that caused them are skipped), and go on. False when there is no checkpoint yet."""
        at = self.step
        if checkpoint.latest_step(self.ckpt_dir) is None:
            metrics.write({"event": "rollback impossible", "step": at, "why": "no checkpoint yet"})
            self.guard.reset_skips()
            return False
        self.guard.rolled_back(at)  # raises TrainingDiverged when rollbacks repeat
        back_to = self.restore(with_data=False)
        self.last_applied = self.last_saved = back_to
        self.guard.reset_skips()
        metrics.write({"event": "rolled back", "step": at, "to_step": back_to,
                       "why": f"{self.cfg.spike.max_skips} skipped steps within {self.cfg.spike.skip_window}"})
        return True


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = parse(argv)
    except ConfigError as exc:
        print(f"refinery train: error: {exc}", file=sys.stderr, flush=True)
        return 2
    signals = SignalFlag().install()  # SIGTERM/SIGINT end the step, save, and stop (training/stopping.py)
    env = init(cfg.device)
    trainer = None
    try:
        checkpoint.check_out(cfg)  # on every rank: a refusal must not leave the other ranks waiting at the barrier
        if env.main:
            prepare_out(cfg)
        if env.device.type == "cpu":
            set_threads(cfg, env)
        barrier()
        trainer = Trainer(cfg, env)
        history = trainer.train(stop_after=cfg.stop_after, faults=FaultInjector(cfg.inject), signals=signals)
        summary = summarize(trainer, history)
        if summary:
            files.write_atomically(os.path.join(cfg.out, "summary.json"), json.dumps(summary, indent=1))
            mfu = f", MFU {summary['mfu']:.1%}" if summary["mfu"] is not None else ""
            peak = max(m["peak_rss_mib"] for m in summary["memory_per_rank"])
            print(f"[train] finished at step {trainer.step}: loss {summary['first_loss']:.4f} -> "
                  f"{summary['recent_loss']:.4f} (mean of the last {summary['recent_steps']} steps; last step "
                  f"{summary['last_loss']:.4f}), {summary['skipped_steps']} skipped, "
                  f"{summary['tokens_per_s']:,.0f} tokens/s, {summary['achieved_tflops'] * 1e3:.2f} GFLOP/s{mfu}, "
                  f"peak RSS {peak:,.0f} MiB per rank", flush=True)
    except (checkpoint.CheckpointError, DataError, FileNotFoundError, TrainingDiverged) as exc:
        print(f"refinery train: error: {exc}" + (f" (rank {env.rank})" if env.world_size > 1 else ""),
              file=sys.stderr, flush=True)
        return 2
    except Stopped as stop:
        if env.main:
            print(stop_message(stop, argv, trainer.ckpt_dir), file=sys.stderr, flush=True)
        return stop.exit_code
    except KeyboardInterrupt:  # a second signal: at once, from wherever the run was
        if env.main:
            saved = trainer.last_saved if trainer is not None else 0
            print(f"refinery train: interrupted; the last checkpoint is step {saved}: the same command with --resume "
                  f"continues from it" if saved else "refinery train: interrupted before the first checkpoint",
                  file=sys.stderr, flush=True)
        return 130
    finally:
        signals.restore()
        shutdown()
    return 0


def set_threads(cfg: TrainConfig, env: Dist) -> None:
    """torch's CPU threads (`choose_threads`); a resumed run takes the count its run started with, since
    a matrix product's sums depend on how many threads split them, and a resume must repeat the losses exactly."""
    path = os.path.join(cfg.out, "threads.json")
    threads, why = choose_threads(int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    if cfg.resume and why != "OMP_NUM_THREADS" and os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            threads, why = int(json.load(fh)["threads"]), "as the run being resumed"
    elif env.main:
        files.write_atomically(path, json.dumps({"threads": threads, "why": why}))
    use_cpu_threads(threads=threads)
    if env.main:
        print(f"[train] {threads} torch thread(s) per rank ({why})", flush=True)


def prepare_out(cfg: TrainConfig) -> None:
    """Create OUT; with --overwrite, drop an earlier run's checkpoints and logs first."""
    if cfg.overwrite:
        shutil.rmtree(os.path.join(cfg.out, "checkpoints"), ignore_errors=True)
        for name in ("metrics.jsonl", "summary.json", "curves.png"):
            if os.path.exists(os.path.join(cfg.out, name)):
                os.remove(os.path.join(cfg.out, name))
    os.makedirs(cfg.out, exist_ok=True)
    files.write_atomically(os.path.join(cfg.out, "train_config.json"), cfg.to_json())


if __name__ == "__main__":
    # Flush, then leave without interpreter teardown: most likely pyarrow's thread pool intermittently
    # aborts at exit with "terminate called without an active exception" after all work is done
    # (apache/arrow#34314, open; also seen in the pipeline's CLI), which torchrun reports as a failed rank. Every
    # output is already closed (metrics) or fsynced and renamed (checkpoints) at this point.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
