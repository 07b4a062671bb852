# The models of an experiment: the primary one (models/<experiment>/<feature_set>-all, trained with `training`)
# and one per compared feature set (trained with `training` updated by `compare_training`, a smaller budget
# stated in the report) in rule `train`; the ablation groups of the primary feature set in rule `train_ablation`.
# Each model is scored right after training: results/predictions/<experiment>/<model>.parquet and
# results/tables/mape/<experiment>/<model>.csv.
COMPARE_TRAINING = {**config["training"], **(config.get("compare_training") or {})}


def model_outputs(models):
    """Output paths of the (feature set, group) models of one experiment (wildcard left in)."""
    names = [f"{fs}-{g}" for fs, g in models]
    return {
        "models": [f"models/{{experiment}}/{n}/model.pt" for n in names],
        "metas": [f"models/{{experiment}}/{n}/meta.json" for n in names],
        "predictions": [f"results/predictions/{{experiment}}/{n}.parquet" for n in names],
        "mape": [f"results/tables/mape/{{experiment}}/{n}.csv" for n in names],
    }


def model_specs(models):
    """Per model: feature set, group, budget and its feature table (the rule script adds the output paths)."""
    return [{"feature_set": fs, "group": g,
             "training": config["training"] if (fs, g) == (FEATURE_SET, "all") else COMPARE_TRAINING,
             "table": f"results/features/{fs}/{{experiment}}.parquet",
             "meta": f"results/features/{fs}/{{experiment}}.json"} for fs, g in models]


TRAINED = [(FEATURE_SET, "all")] + [(fs, "all") for fs in COMPARE_SETS]
ABLATED = [(FEATURE_SET, g) for g in ABLATION.get("groups", [])]


rule train:
    input:
        tables=[f"results/features/{fs}/{{experiment}}.parquet" for fs, _ in TRAINED],
        metas=[f"results/features/{fs}/{{experiment}}.json" for fs, _ in TRAINED],
        leak_checks=[f"results/leak_check/{fs}/{{experiment}}.json" for fs, _ in TRAINED],
        **RECIPE_INPUT,
        code=code_inputs("scripts/train.py"),
    output:
        **model_outputs(TRAINED),
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        models=model_specs(TRAINED),
        seed=config["seed"],
    threads: 1
    benchmark:
        "results/benchmarks/train/{experiment}.tsv"
    log:
        "results/logs/train/{experiment}.log",
    script:
        "../scripts/train.py"


rule train_ablation:
    input:
        table=f"results/features/{FEATURE_SET}/{{experiment}}.parquet",
        meta=f"results/features/{FEATURE_SET}/{{experiment}}.json",
        leak_check=f"results/leak_check/{FEATURE_SET}/{{experiment}}.json",
        **RECIPE_INPUT,
        code=code_inputs("scripts/train.py"),
    output:
        **model_outputs(ABLATED),
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        models=model_specs(ABLATED),
        seed=config["seed"],
    threads: 1
    benchmark:
        "results/benchmarks/train_ablation/{experiment}.tsv"
    log:
        "results/logs/train/{experiment}_ablation.log",
    script:
        "../scripts/train.py"
