"""The pipeline's steps as plain functions, one module per stage; each Snakemake rule script imports only its stage.

Each step reads its inputs, validates them, and writes its outputs atomically. The modules are kept apart so a
rule's code inputs (the ``synperf`` modules its script imports, see ``code_inputs`` in the Snakefile) are only the
code it runs: editing the report does not retrain a model.

``ingest``      ingest_source, merge_measurements
``features``    experiment_features (features, split label and target per row, every feature set of an experiment)
``leaks``       check_leaks (the split contract, before training)
``train``       train_models (an experiment's models, each scored right after training), select_group
``evaluate``    evaluate_experiment (predictions and MAPE tables of one model)
``selection``   score_selection, choose_feature_set
``protocols``   evaluate_protocols (every method under the evaluation protocols)
``common``      row selection shared by the stages
``rule``        run: what every rule script does around its stage (log file, one-line errors for bad input)

Stages are per experiment, not per model: one job reads an experiment's tables once and does all of its work,
so the job count (and Python start-up time) does not grow with the number of feature sets.

Configuration is passed in, never read from the checkout: ``registry_path`` (the config's ``gpu_registry``) and
``measured_dir`` (``hardware_measurements_dir``, or None when ``characterize.use_measured`` is false: the
datasheet registry) name the GPU registry every stage that needs one loads.
"""
