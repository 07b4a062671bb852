# The models of an experiment: the primary one (models/<experiment>/<feature set>-all of the experiment's primary
# feature set, trained with `training`) and one per other feature set of `feature_set` and `compare_feature_sets`
# (trained with `training` updated by `compare_training`, a smaller budget stated in the report) in rule `train`;
# the ablation groups of the configured `feature_set` in rule `train_ablation`. Rule `train` also fits the
# experiment's fingerprint predictor on the configured `feature_set`'s table (models/<experiment>/fingerprint.joblib,
# synperf/model/fingerprint.py), its correction capped at the `training` row cap as on the protocols' configured fold.
# Each model is scored right after training: results/predictions/<experiment>/<model>.parquet and
# results/tables/mape/<experiment>/<model>.csv.


rule train:
    input:
        **RECIPE_INPUT,
        tables=[f"results/features/{fs}/{{experiment}}.parquet" for fs, _ in TRAINED],
        metas=[f"results/features/{fs}/{{experiment}}.json" for fs, _ in TRAINED],
        leak_checks=[f"results/leak_check/{fs}/{{experiment}}.json" for fs, _ in TRAINED],
        registry=config["gpu_registry"],
        hardware=MEASURED_FILES,
        fp_table=f"results/features/{FEATURE_SET}/{{experiment}}.parquet",
        fp_meta=f"results/features/{FEATURE_SET}/{{experiment}}.json",
        code=code_inputs("scripts/train.py"),
    output:
        **model_outputs(TRAINED),
        fingerprint="models/{experiment}/fingerprint.joblib",
    log:
        "results/logs/train/{experiment}.log",
    benchmark:
        "results/benchmarks/train/{experiment}.tsv"
    priority: stage_priority("train")
    conda:
        "../environment.yml"
    threads: 1
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        models=lambda wc: model_specs(TRAINED, wc.experiment),
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
        fp_max_train_rows=config["training"]["max_train_rows"],
    script:
        "../scripts/train.py"


rule train_ablation:
    input:
        **RECIPE_INPUT,
        table=f"results/features/{FEATURE_SET}/{{experiment}}.parquet",
        meta=f"results/features/{FEATURE_SET}/{{experiment}}.json",
        leak_check=f"results/leak_check/{FEATURE_SET}/{{experiment}}.json",
        code=code_inputs("scripts/train.py"),
    output:
        **model_outputs(ABLATED),
    log:
        "results/logs/train/{experiment}_ablation.log",
    benchmark:
        "results/benchmarks/train_ablation/{experiment}.tsv"
    priority: stage_priority("train_ablation")
    conda:
        "../environment.yml"
    threads: 1
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        models=lambda wc: model_specs(ABLATED, wc.experiment),
        seed=config["seed"],
    script:
        "../scripts/train.py"
