"""rank4class_tf: multiclass classification as learning to rank, on TF-Ranking."""

import setuptools

# The absl binaries (pipelines/*.py with a `main`), each installed as the
# console command `rank4class-<binary>` (`_` written `-`), which runs it as
# `python -m` does (pipelines/entry_points.py). tests/test_install.py keeps
# this list equal to the binaries.
BINARIES = ("calibrate", "compare_budgets", "compare_runs", "demo",
            "evaluate", "evaluate_sorter", "export", "import_sorter",
            "inspect_data", "plot_sorter", "predict", "spearman_regression", "study", "train", "train_sorter",
            "zero_shot_baselines", "zero_shot_fit")

setuptools.setup(
    name="rank4class_tf",
    version="0.1.0",
    description=("Rank4Class in TensorFlow: classification as learning to "
                 "rank with TF-Ranking."),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11,<3.14",
    packages=[
        *setuptools.find_packages(
            include=["rank4class_tf", "rank4class_tf.*"]),
        # The binaries: the checkout's pipelines/ (`python -m pipelines.train`)
        # installed as rank4class_tf.pipelines, not as a top-level
        # `pipelines`, a name another PyPI project holds. benchmarks/ and
        # tools/ are not installed: they run from a checkout.
        "rank4class_tf.pipelines",
        # Data files only: the repository's top-level data/ (GoEmotions, its
        # README and licence) is installed as rank4class_tf/data/shipped/,
        # where `datasets.REPO_DATA_DIR` finds it; a checkout reads data/ in
        # place.
        "rank4class_tf.data.shipped",
    ],
    package_dir={"rank4class_tf.pipelines": "pipelines",
                 "rank4class_tf.data.shipped": "data"},
    entry_points={"console_scripts": [
        f"rank4class-{name.replace('_', '-')}="
        f"rank4class_tf.pipelines.entry_points:{name}" for name in BINARIES]},
    include_package_data=True,
    package_data={"rank4class_tf": ["sorting/pretrained/*",
                                   "study/paper_tables/*.json"],
                  "rank4class_tf.data.shipped": ["README.md", "goemotions/*",
                                                "examples/emotions_csv/*"]},
    # Two stacks (README, "Two stacks"): the reference one on Python 3.11
    # and the current one on 3.12+. Exact versions live in constraints.txt and
    # constraints-current.txt; install with
    # `pip install -r requirements.txt -c <constraints file>` (the Makefile).
    install_requires=[
        'tensorflow==2.15.1; python_version < "3.12"',
        'tensorflow-ranking==0.5.5; python_version < "3.12"',
        'tf-models-official==2.15.0; python_version < "3.12"',
        'tensorflow-text==2.15.0; python_version < "3.12"',
        'tensorflow-datasets==4.9.4; python_version < "3.12"',
        'tensorflow-metadata==1.15.0; python_version < "3.12"',
        'protobuf>=4.25,<4.26; python_version < "3.12"',
        # Current stack. TF-Ranking 0.5.5 is not declared here: its stale
        # tensorflow<2.16 pin would make pip refuse TensorFlow 2.20; install
        # it with `pip install --no-deps tensorflow-ranking==0.5.5`
        # (rank4class_tf/compat.py says so if it is missing).
        'tensorflow>=2.20,<2.21; python_version >= "3.12"',
        'tf-keras>=2.20,<2.21; python_version >= "3.12"',
        'tf-models-official>=2.20,<2.21; python_version >= "3.12"',
        'tensorflow-text>=2.20,<2.21; python_version >= "3.12"',
        'tensorflow-datasets>=4.9.9; python_version >= "3.12"',
        'tensorboard>=2.20,<2.21; python_version >= "3.12"',
        'importlib-resources; python_version >= "3.12"',  # tfds 4.9.10
        "absl-py",
        "scikit-learn",
        "safetensors",
    ],
)
