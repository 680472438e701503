"""torch.profiler's per-op table (self CPU time) over `steps` calls of `step`, after one warm-up
call: the PyTorch half of RESULTS.md's per-op profiles (bench_lstm_torch.py, bench_train_torch.py
with --profile)."""
from torch.profiler import ProfilerActivity, profile


def print_profile(step, steps, title, rows=18):
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    print(title)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))
