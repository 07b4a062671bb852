# Paper-style evaluation: our MLP and the baselines (synperf/evaluation/baselines.py) under the configured split,
# leave-one-GPU-out and leave-one-architecture-out (synperf/evaluation/protocols.py). Part of the default target: the report
# reads these tables. `protocols.experiments` run every protocol, `protocols.configured_only` the configured split
# only. On the configured split synperf_mlp is the experiment's primary model (no retraining); each leave-one-out
# fold's MLP reads the feature set the other experiments' selection scores pick without the fold's tested GPUs.
# Each leave-one-out fold also predicts the serving simulator's launches on the GPU it leaves out (rule
# serving_logo, synperf/evaluation/fold_launches.py).


rule evaluate_protocols:
    input:
        table=f"results/features/{FEATURE_SET}/{{experiment}}.parquet",
        meta=f"results/features/{FEATURE_SET}/{{experiment}}.json",
        leak_check=f"results/leak_check/{FEATURE_SET}/{{experiment}}.json",
        registry=config["gpu_registry"],
        model=primary_input("models/{experiment}/{fs}-all/model.pt"),
        model_meta=primary_input("models/{experiment}/{fs}-all/meta.json"),
        candidate_tables=expand("results/features/{fs}/{{experiment}}.parquet", fs=SELECTION["candidates"]),
        candidate_metas=expand("results/features/{fs}/{{experiment}}.json", fs=SELECTION["candidates"]),
        feature_scores=expand(
            "results/selection/{experiment}/{feature_set}.csv",
            experiment=SELECTION_EXPERIMENTS,
            feature_set=SELECTION["candidates"],
        ),
        code=code_inputs("scripts/evaluate_protocols.py"),
        hardware=MEASURED_FILES,
        serving_launches="results/serving/serving_launches.parquet",
    output:
        table="results/protocols/{experiment}.csv",
        cdf="results/protocols/{experiment}_cdf.csv",
        rows="results/protocols/{experiment}_rows.parquet",
        serving_logo="results/protocols/{experiment}_serving_logo.parquet",
    log:
        "results/logs/evaluate_protocols/{experiment}.log",
    benchmark:
        "results/benchmarks/evaluate_protocols/{experiment}.tsv"
    priority: stage_priority("evaluate_protocols")
    conda:
        "../environment.yml"
    threads: 1
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        training=lambda wc: {**config["training"], **PROTOCOLS.get("training", {})},
        names=lambda wc: protocol_names(wc.experiment),
        methods=PROTOCOLS.get("methods"),
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
        experiments={e: config["experiments"][e] for e in EXPERIMENTS},
        candidates=SELECTION["candidates"],
        feature_set=FEATURE_SET,
        logo_gpus=lambda wc: serving_only_logo_gpus(wc.experiment),
    script:
        "../scripts/evaluate_protocols.py"


# convenience target: only the protocol tables (the report needs them too)
rule protocols:
    input:
        expand("results/protocols/{experiment}.csv", experiment=PROTOCOL_EXPERIMENTS),
