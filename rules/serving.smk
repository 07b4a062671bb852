# Serving-level latency (synperf/serving/): vLLM's continuous-batching scheduler priced by the kernel predictors,
# scored against aiconfigurator's measured vLLM serving runs, beside aiconfigurator's cached estimate
# (data/baselines/aiconfigurator_serving.csv, written by benchmarks/aiconfigurator_serving.py).
from synperf.serving.silicon import MODELS as SILICON_MODELS

SERVING_FAMILIES = [
    "gemm",
    "gemm_fp8_aiconfigurator",
    "attention_prefill",
    "attention_decode",
    "rmsnorm",
    "silu_mul",
    "fused_moe",
]
# the example configs of every model the priced silicon rows name (dense and MoE)
SERVING_EXAMPLES = expand("examples/models/{m}.json", m=sorted(set(SILICON_MODELS.values())))


rule serving:
    input:
        models=fingerprint_files([e for e in SERVING_FAMILIES if e in EXPERIMENTS]),
        registry=config["gpu_registry"],
        code=code_inputs("scripts/serving.py"),
        hardware=MEASURED_FILES,
        baseline="data/baselines/aiconfigurator_serving.csv",
        examples=SERVING_EXAMPLES,
    output:
        scores="results/serving/serving_scores.csv",
        mape="results/serving/serving_mape.csv",
        rows="results/serving/serving_rows.csv",
        figure="results/serving/serving_scatter.png",
        error="results/serving/serving_error.json",
    log:
        "results/logs/serving.log",
    benchmark:
        "results/benchmarks/serving.tsv"
    priority: stage_priority("e2e")
    conda:
        "../environment.yml"
    params:
        data_dir=config["public_data_dir"],
        measured_dir=MEASURED_DIR,
        e2e=config.get("e2e", {}),
        experiments=config["experiments"],
    script:
        "../scripts/serving.py"


# Leave-one-GPU-out serving scores (synperf/serving/logo.py): the launches the scheduler prices on the GPUs the
# serving experiments trained on (no trained model needed) go into the protocols stage, whose leave-one-GPU-out fold
# of each such GPU predicts them (results/protocols/{experiment}_serving_logo.parquet); the rows of those GPUs are
# then re-priced from those predictions, the other rows (GPUs no family trained on) keep their scores.
SERVING_LOGO_EXPERIMENTS = [e for e in SERVING_FAMILIES if e in EXPERIMENTS]


rule serving_launches:
    input:
        registry=config["gpu_registry"],
        code=code_inputs("scripts/serving_launches.py"),
        hardware=MEASURED_FILES,
        examples=SERVING_EXAMPLES,
    output:
        "results/serving/serving_launches.parquet",
    log:
        "results/logs/serving_launches.log",
    priority: stage_priority("evaluate_protocols")
    conda:
        "../environment.yml"
    params:
        data_dir=config["public_data_dir"],
        measured_dir=MEASURED_DIR,
        e2e=config.get("e2e", {}),
        experiments=config["experiments"],
        gpus=sorted({g for e in SERVING_LOGO_EXPERIMENTS for g in config["experiments"][e]["seen"]}),
    script:
        "../scripts/serving_launches.py"


rule serving_logo:
    input:
        scores="results/serving/serving_scores.csv",
        predictions=expand("results/protocols/{experiment}_serving_logo.parquet", experiment=SERVING_LOGO_EXPERIMENTS),
        models=fingerprint_files([e for e in SERVING_FAMILIES if e in EXPERIMENTS]),
        registry=config["gpu_registry"],
        code=code_inputs("scripts/serving_logo.py"),
        hardware=MEASURED_FILES,
        baseline="data/baselines/aiconfigurator_serving.csv",
        examples=SERVING_EXAMPLES,
    output:
        scores="results/serving/serving_logo_scores.csv",
        mape="results/serving/serving_logo_mape.csv",
    log:
        "results/logs/serving_logo.log",
    benchmark:
        "results/benchmarks/serving_logo.tsv"
    priority: stage_priority("e2e")
    conda:
        "../environment.yml"
    params:
        data_dir=config["public_data_dir"],
        measured_dir=MEASURED_DIR,
        e2e=config.get("e2e", {}),
        experiments=config["experiments"],
    script:
        "../scripts/serving_logo.py"
