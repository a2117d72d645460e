#!/usr/bin/env bash
# Reproduce the seed's TaPS figures 2.8, 2.9 and 2.10, scaled to this machine (2 cores),
# with `tether bench run`, then draw them with `tether bench plot` into docs/figures/.
#
#   [EXECUTORS="process-pool dask"] bash benchmarks/taps_figures.sh [--quick] [fig28|fig29|fig210 ...]
#
# Run directories go to benchmarks/results/taps-runs/<figure>/; the plotted numbers to
# benchmarks/results/taps_<figure>.json. Needs Redis on 127.0.0.1:6379 (fig. 2.10).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
TETHER="${TETHER:-$ROOT/.venv/bin/tether}"
OUT="$HERE/results/taps-runs"
FIGURES="$ROOT/docs/figures"
QUICK=0
WHICH=()
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    *) WHICH+=("$arg") ;;
  esac
done
[ ${#WHICH[@]} -eq 0 ] && WHICH=(fig28 fig29 fig210)
REPEATS=$([ $QUICK = 1 ] && echo 1 || echo 3)
# shellcheck disable=SC2206
EXECUTORS=(${EXECUTORS:-process-pool dask parsl-local ray faas})
PREFIX="tether-bench-fig-$$:"

workers_opt() {  # executor, workers -> the option that sets its worker count
  case "$1" in
    thread-pool) echo "--engine.executor.max_threads $2" ;;
    process-pool) echo "--engine.executor.max_processes $2" ;;
    dask|parsl-local|faas) echo "--engine.executor.workers $2" ;;
    ray) echo "--engine.executor.num_cpus $2" ;;
  esac
}

run() {  # figure, then tether bench run arguments
  local fig="$1"; shift
  mkdir -p "$OUT/$fig"
  (cd "$OUT/$fig" && "$TETHER" bench run --no-progress --logging.level WARNING \
      --run.dir_format '{name}_{executor}_{transformer}_{timestamp}' "$@" >/dev/null) \
    || echo "run failed: $fig $*" >&2
}

for fig in "${WHICH[@]}"; do
  rm -rf "${OUT:?}/$fig"
  echo "== $fig ($(uptime))" >&2
  case "$fig" in
    fig28)  # makespan of each app on each executor (table 2.3, scaled down)
      for r in $(seq "$REPEATS"); do
        for ex in "${EXECUTORS[@]}"; do
          w=$(workers_opt "$ex" 2)
          run fig28 --app cholesky --executor "$ex" $w --app.matrix_size 2000 --app.block_size 250
          run fig28 --app mapreduce --executor "$ex" $w --app.map_tasks 8 --app.words_per_task 100000
          run fig28 --app fedlearn --executor "$ex" $w --app.clients 4 --app.rounds 2
          run fig28 --app moldesign --executor "$ex" $w --app.initial_count 4 --app.batch_size 2 --app.search_count 8
          run fig28 --app physics --executor "$ex" $w --app.simulations 8 --app.steps 2000
        done
      done ;;
    fig29)  # no-op task throughput against workers (bag of tasks, n in flight)
      for r in $(seq "$REPEATS"); do
        for ex in thread-pool "${EXECUTORS[@]}"; do
          for w in 1 2 4; do
            run fig29 --app synthetic --executor "$ex" $(workers_opt "$ex" "$w") \
              --app.structure bag --app.task_count "$([ $QUICK = 1 ] && echo 200 || echo 1000)" --app.bag_max_running "$w" --app.warmup_tasks 4
          done
        done
      done ;;
    fig210)  # round trip against payload size, by value and through a Store on Redis
      for r in $(seq "$REPEATS"); do
        for ex in "${EXECUTORS[@]}"; do
          for size in $([ $QUICK = 1 ] && echo 100 10000 1000000 || echo 100 10000 1000000 10000000); do
            w=$(workers_opt "$ex" 2)
            run fig210 --app synthetic --executor "$ex" $w --app.structure bag \
              --app.task_count 32 --app.bag_max_running 2 --app.task_data_bytes "$size" --app.warmup_tasks 2
            run fig210 --app synthetic --executor "$ex" $w --app.structure bag \
              --app.task_count 32 --app.bag_max_running 2 --app.task_data_bytes "$size" --app.warmup_tasks 2 \
              --transformer store --engine.transformer.connector.kind redis \
              --engine.transformer.connector.options "{\"hostname\": \"127.0.0.1\", \"port\": 6379, \"prefix\": \"$PREFIX\"}"
          done
        done
      done ;;
  esac
done

mkdir -p "$FIGURES"
for fig in "${WHICH[@]}"; do
  case "$fig" in
    fig28) kind=makespan; name=taps_fig2_8_makespan ;;
    fig29) kind=scaling; name=taps_fig2_9_scaling ;;
    fig210) kind=data; name=taps_fig2_10_data ;;
  esac
  "$TETHER" bench plot "$OUT/$fig" --kind "$kind" -o "$FIGURES/$name" --json \
    > "$HERE/results/$name.json"
  echo "wrote $FIGURES/$name.png, .svg and results/$name.json" >&2
done
