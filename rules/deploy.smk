# Deploy models (target `deploy`): each core family's fingerprint predictor fitted on EVERY GPU its feature table
# measured, seen and unseen alike (models/deploy/<experiment>/fingerprint.joblib), and its primary MLP trained the
# same way with the recipe, feature set and training settings of its evaluation model (mlp/;
# synperf.pipeline.train.train_models, deploy=True).
# `synperf.api.predict`, `synperf plan` and `synperf e2e` answer with them where they exist (models="deploy");
# every evaluation, the report and the end-to-end scoring keep the evaluation models of models/<experiment>/.
rule deploy_model:
    input:
        **RECIPE_INPUT,
        table=primary_input("results/features/{fs}/{experiment}.parquet"),
        meta=primary_input("results/features/{fs}/{experiment}.json"),
        registry=config["gpu_registry"],
        hardware=MEASURED_FILES,
        fp_table=f"results/features/{FEATURE_SET}/{{experiment}}.parquet",
        fp_meta=f"results/features/{FEATURE_SET}/{{experiment}}.json",
        code=code_inputs("scripts/deploy.py"),
    output:
        **{name.split(".")[0]: f"models/deploy/{{experiment}}/{name}" for name in DEPLOY_FILES},
        mlp=directory("models/deploy/{experiment}/mlp"),
    log:
        "results/logs/deploy/{experiment}.log",
    benchmark:
        "results/benchmarks/deploy/{experiment}.tsv"
    conda:
        "../environment.yml"
    threads: 1
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        feature_set=lambda wc: primary_fs(wc.experiment),
        training=config["training"],
        fp_max_train_rows=config["training"]["max_train_rows"],
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/deploy.py"


rule deploy:
    input:
        deploy_outputs(CORE_EXPERIMENTS),
