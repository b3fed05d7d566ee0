"""The README's quick starts run as shown (tests/project/test_docs_blocks.py runs
them, with every page of docs/): here, that they show everything they use:
no hidden preamble, the devices set up before jax is imported, and every file
a command reads made by an earlier block."""

import re

from conftest import REPO

README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```$", README, re.S | re.M)


def test_no_hidden_code():
    assert "<!--" not in README, "no HTML comments: every line a quick start runs is shown"


def test_the_three_quick_starts_are_there():
    for title in ("Quick start a: port a jax.pmap loop", "Quick start b: emit, diff and run your own file",
                  "Quick start c: a lit golden test"):
        assert f"\n## {title}\n" in README, title


def test_quick_start_a_sets_up_8_cpu_devices_before_importing_jax():
    (first, *_) = [code for lang, code in BLOCKS if lang == "python"]
    assert first.index('os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"') < \
        first.index("import jax")
    assert "device_put_replicated(" not in first.replace("# was: jax.device_put_replicated(", "")


def test_every_file_a_command_uses_is_made_first():
    made: set[str] = set()
    for lang, code in BLOCKS:
        if lang != "sh":
            continue
        for line in code.splitlines():
            made |= set(re.findall(r"cat > (\S+) <<", line)) | set(re.findall(r"-o (\S+\.mlir)", line))
            for used in re.findall(r"\b([\w./-]+\.(?:py|mlir|test))\b", line.split("#")[0]):
                if "%" in used or line.lstrip().startswith(("cat >", "#")):
                    continue
                assert used in made or used.split(":")[0] in made or f"-o {used}" in line, \
                    f"README: {used} is used before a shown command makes it"


def test_the_mhlo_excerpt_is_what_quick_start_b_emits():
    import numpy as np
    from jax import lax

    import pxla_mlir

    excerpt = README.split("```mlir\n", 1)[1].split("```", 1)[0]
    step = pxla_mlir.pmap(lambda x: x - lax.pmean(x, "i"), axis_name="i")
    text = step.lower(np.ones((8, 3), np.float32)).as_text().replace("@pmap__lambda", "@pmap_step")
    # the lines pxla_mlir writes (jax's own lowering of the body, the lines between, may vary by jax release)
    ours = [line for line in excerpt.splitlines() if "module @" in line or "@main" in line or "all_reduce" in line]
    assert len(ours) == 3, ours
    for line in ours:
        assert line in text, f"the README's MHLO excerpt is stale: {line!r} is not in\n{text}"


def test_the_install_steps_install_build_before_using_it():
    (install,) = [code for lang, code in BLOCKS if lang == "console" and "python -m build" in code]
    commands = [line.split("#")[0].strip() for line in install.splitlines()]
    assert "pip install build" in commands and commands.index("pip install build") < commands.index("python -m build")


def test_quick_start_c_installs_lit_before_running_it():
    """make demo installs the runtime only: lit and filecheck come with the lit extra, before the first lit."""
    sh = "\n".join(code for lang, code in BLOCKS if lang == "sh")
    assert "pip install --quiet 'pxla-mlir[lit]'" in sh and sh.index("pxla-mlir[lit]") < sh.index("lit -v")
