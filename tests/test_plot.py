"""``kvproof simulate GEOMETRY --plot FILE.svg|png`` (kvproof/plot.py): the pictures hold what they
claim (an SVG's axes, labels and series; a PNG's size and colours), the same bytes every run, and
a clear exit 2 when the picture cannot be drawn."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the plot extra: pip install 'kvproof[plot]' (in the test extra too)")

from kvproof.cli import main  # noqa: E402
from kvproof.commands.simulate import read_geometry  # noqa: E402
from kvproof.plot import WorkloadRecorder  # noqa: E402
from kvproof.sim.document import simulate_geometry  # noqa: E402

CODE = Path(__file__).resolve().parents[1]
GEOMETRIES = CODE / "examples" / "geometries"
PREEMPTING = GEOMETRIES / "plain-32-requests.json"  # 12 requests on 599 blocks: 3 preemptions, prefix hits
GLM = GEOMETRIES / "glm-like-packed.json"  # 6 KV cache groups, start-up only
TWO_GROUPS = CODE / "tests" / "conformance" / "requests" / "mamba_align_preempt_restore.json"
SVG = "{http://www.w3.org/2000/svg}"


def _simulate(capsys, geometry: Path, *args: str) -> tuple[int, str, str]:
    code = main(["simulate", str(geometry), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _result(capsys, geometry: Path) -> dict:
    code, out, _ = _simulate(capsys, geometry, "--format", "json")
    assert code == 0
    return json.loads(out)


def test_the_svg_of_a_workload_with_preemptions(capsys, tmp_path) -> None:
    picture = tmp_path / "workload.svg"
    code, out, err = _simulate(capsys, PREEMPTING, "--plot", str(picture))
    assert code == 0 and err == ""
    assert "3 preemptions" in out  # the report is still printed
    workload = _result(capsys, PREEMPTING)["workload"]
    root = ET.parse(picture).getroot()
    ids = [element.get("id") for element in root.iter() if element.get("id")]
    assert len(ids) == len(set(ids))  # one element per id
    for series in ("pool-group-0", "blocks-per-request", "request-held-group-0", "request-free-blocks",
                   "workload-held-group-0", "workload-free-blocks", "prefix-hit", "probe"):
        assert series in ids, series
    assert sorted(i for i in ids if i.startswith("preemption-")) == \
        [f"preemption-{n}" for n in range(workload["totals"]["preemptions"])] == ["preemption-0", "preemption-1",
                                                                              "preemption-2"]
    axes = [i for i in ids if i.startswith("axes_")]
    assert len(axes) == 7  # pool, blocks per request, the legend row, two panels with a free-blocks axis each
    texts = {"".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")}
    for label in ("The pool at start-up: 599 usable blocks", "Blocks per request at 8,192 tokens", "KV cache group",
                  "blocks", "step", "blocks held (stacked by group)", "free blocks",
                  "Workload over time: 12 requests, 278 steps, 3 preemptions", "preemption (3)",
                  "prefix hit at admission (8)", "preempt r5", "preempt r11", "preempt r10",
                  "blocks of 2,097,152 bytes (block 0, the null block, not shown)"):
        assert label in texts, label
    # the free-blocks series is a step line: two vertices per step, one more for the last step's width
    (line,) = [e for e in root.iter() if e.get("id") == "workload-free-blocks"]
    path = next(e for e in line.iter(f"{SVG}path"))
    assert path.get("d").count("L") + 1 == 2 * (len(workload["steps"]) + 1) - 1


def test_the_png_of_the_glm_geometry(capsys, tmp_path) -> None:
    from PIL import Image

    picture = tmp_path / "glm.png"
    assert _simulate(capsys, GLM, "--plot", str(picture))[0] == 0
    result = _result(capsys, GLM)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = Image.open(picture).convert("RGB")
    width, height = image.size
    assert width == 1100 and 300 < height < 700  # 11 in at 100 dpi; the start-up panels only
    colours = dict((colour, count) for count, colour in image.getcolors(maxcolors=width * height))
    assert width * height - colours.get((255, 255, 255), 0) > 0.1 * width * height  # not blank
    tab10 = [(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28), (0x94, 0x67, 0xBD),
             (0x8C, 0x56, 0x4B)]
    assert len(result["groups"]) == 6 and all(colour in colours for colour in tab10)  # every group drawn


def test_the_same_geometry_gives_the_same_svg(capsys, tmp_path) -> None:
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    assert _simulate(capsys, GLM, "--plot", str(first))[0] == 0
    assert _simulate(capsys, GLM, "--plot", str(second))[0] == 0
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("geometry", [PREEMPTING, TWO_GROUPS])
def test_the_workload_series_adds_up_to_the_pool(geometry) -> None:
    """on_step sees every step; the blocks the groups hold and the free blocks make the usable pool."""
    recorder = WorkloadRecorder()
    result = simulate_geometry(read_geometry(str(geometry)), recorder)
    steps = result["workload"]["steps"]
    assert len(recorder.held) == len(steps) and len(recorder.held[0]) == len(result["groups"])
    assert result["workload"]["totals"]["preemptions"] > 0
    for held, step in zip(recorder.held, steps):
        assert sum(held) + step["free_blocks"] == result["num_usable_blocks"], step["step"]
    assert max(map(sum, recorder.held)) > 0 and recorder.held[-1] == [0] * len(result["groups"])


def test_without_matplotlib_a_clear_message_and_exit_2(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    picture = tmp_path / "p.svg"
    code, out, err = _simulate(capsys, GLM, "--plot", str(picture))
    assert code == 2 and out == "" and not picture.exists()
    assert "--plot needs matplotlib, which is not installed" in err and "pip install 'kvproof[plot]'" in err


def test_a_picture_name_without_svg_or_png_is_exit_2(capsys, tmp_path) -> None:
    code, out, err = _simulate(capsys, GLM, "--plot", str(tmp_path / "p.jpg"))
    assert code == 2 and out == ""
    assert "the picture's name must end in .svg or .png" in err


def test_a_geometry_vllm_refuses_has_no_picture(capsys, tmp_path) -> None:
    picture = tmp_path / "p.svg"
    code, out, err = _simulate(capsys, GEOMETRIES / "refusal-not-enough-memory.json", "--plot", str(picture))
    assert code == 1 and not picture.exists()
    assert "no picture: vLLM 0.33.0 would not start" in err


def test_an_unwritable_picture_is_exit_2(capsys, tmp_path) -> None:
    code, _, err = _simulate(capsys, GLM, "--plot", str(tmp_path / "missing" / "p.svg"))
    assert code == 2 and "cannot write the picture" in err
