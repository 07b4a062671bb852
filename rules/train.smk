# One model per (experiment, feature set, feature group): the primary one is
# models/<experiment>/<feature_set>-all and trains with `training`; the others feed the comparison and ablation
# tables and train with `training` updated by `compare_training` (a smaller budget, stated in the report).
def training_for(wildcards):
    if wildcards.feature_set == FEATURE_SET and wildcards.group == "all":
        return config["training"]
    return {**config["training"], **(config.get("compare_training") or {})}


rule train:
    input:
        table="results/features/{feature_set}/{experiment}.parquet",
        meta="results/features/{feature_set}/{experiment}.json",
        leak_check="results/leak_check/{feature_set}/{experiment}.json",
        code=code_inputs("scripts/train.py"),
    output:
        model="models/{experiment}/{feature_set}-{group}/model.pt",
        meta="models/{experiment}/{feature_set}-{group}/meta.json",
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        training=training_for,
        seed=config["seed"],
    threads: 2
    log:
        "results/logs/train_{experiment}_{feature_set}-{group}.log",
    script:
        "../scripts/train.py"
