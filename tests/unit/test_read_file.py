"""read_file: numbered lines, offset and limit, the refusals, images, and the read mark."""

import base64
import json
import os

import pytest

from app.settings import ModelSettings, ToolSettings
from app.tools import read_file
from app.tools.core.base import ToolContext
from app.tools.core.pipeline import execute_call, prepare_call
from app.tools.core.registry import build_registry
from app.tools.files import images

VISION = ModelSettings("m", "openai", "gpt", capabilities={"supports_vision": True})
NO_VISION = ModelSettings("m", "openai", "local", base_url="http://localhost:8000/v1")
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture
def ctx(tmp_path):
    return ToolContext("ws", str(tmp_path))


def read(ctx, **args):
    prep = read_file.prepare(args, ctx)
    if prep.error:
        return prep.error
    return read_file.execute(prep.args, ctx)


def test_lines_are_numbered_right_aligned_with_a_tab(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("alpha\nbeta\n")
    assert read(ctx, path="f.txt").output == "   1\talpha\n   2\tbeta"


def test_numbers_wider_than_four_digits_are_not_cut(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("x\n" * 10_000 + "last\n")
    assert read(ctx, path="f.txt", offset=10_001).output == "10001\tlast"


def test_last_line_without_newline_is_read(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("one\ntwo")
    assert read(ctx, path="f.txt").output == "   1\tone\n   2\ttwo"


def test_windows_line_endings_are_not_shown(ctx, tmp_path):
    (tmp_path / "f.txt").write_bytes(b"one\r\ntwo\r\n")
    assert read(ctx, path="f.txt").output == "   1\tone\n   2\ttwo"


def test_offset_starts_at_that_line(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("a\nb\nc\n")
    assert read(ctx, path="f.txt", offset=2).output == "   2\tb\n   3\tc"


def test_limit_caps_the_lines_and_says_where_to_go_on(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("a\nb\nc\nd\n")
    output = read(ctx, path="f.txt", offset=2, limit=2).output
    assert output == "   2\tb\n   3\tc\n[stopped at line 3 of 4; read on with offset=4]"


def test_limit_reaching_the_end_adds_no_note(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("a\nb\n")
    assert read(ctx, path="f.txt", limit=2).output == "   1\ta\n   2\tb"


@pytest.mark.parametrize("value", [0, -1, "3", 1.5, True])
def test_invalid_offset_is_a_clear_error(ctx, tmp_path, value):
    (tmp_path / "f.txt").write_text("a\n")
    assert read(ctx, path="f.txt", offset=value).startswith(
        "Error: 'offset' must be a line number, 1 or more"
    )


@pytest.mark.parametrize("value", [0, -5, "10", False])
def test_invalid_limit_is_a_clear_error(ctx, tmp_path, value):
    (tmp_path / "f.txt").write_text("a\n")
    assert read(ctx, path="f.txt", limit=value).startswith(
        "Error: 'limit' must be a number of lines, 1 or more"
    )


def test_offset_past_the_end_is_an_error(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("a\nb\n")
    outcome = read(ctx, path="f.txt", offset=5)
    assert (
        outcome.is_error and outcome.output == "Error: offset 5 is past the end of f.txt, which has 2 lines"
    )


def test_empty_file(ctx, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    outcome = read(ctx, path="empty.txt")
    assert outcome.output == "(empty file)" and not outcome.is_error


def test_missing_file(ctx):
    outcome = read(ctx, path="nope.txt")
    assert outcome.is_error and outcome.output == "Error: file not found: nope.txt"


def test_directory_is_refused(ctx, tmp_path):
    (tmp_path / "sub").mkdir()
    outcome = read(ctx, path="sub")
    assert outcome.is_error and "is a directory" in outcome.output


def test_missing_path_argument_is_refused(ctx):
    assert read(ctx) == "Error: read_file needs a non-empty 'path' string"


def test_binary_file_is_refused_with_a_hint_to_use_bash(ctx, tmp_path):
    (tmp_path / "data.bin").write_bytes(b"ELF\x00\x01\x02")
    outcome = read(ctx, path="data.bin")
    assert outcome.is_error and "binary file" in outcome.output and "bash" in outcome.output


def test_nul_after_the_first_8_kb_is_not_binary(ctx, tmp_path):
    (tmp_path / "f.txt").write_bytes(b"a" * 8192 + b"\n\x00\n")
    assert not read(ctx, path="f.txt").is_error


def test_invalid_utf8_is_shown_with_replacement_characters(ctx, tmp_path):
    (tmp_path / "f.txt").write_bytes(b"caf\xe9\n")
    assert read(ctx, path="f.txt").output == "   1\tcaf\ufffd"


def test_relative_path_resolves_against_the_working_directory(ctx, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.txt").write_text("inside\n")
    assert read(ctx, path="sub/f.txt").output == "   1\tinside"


def test_absolute_path_is_used_as_it_is(ctx, tmp_path):
    other = tmp_path / "abs.txt"
    other.write_text("abs\n")
    elsewhere = ToolContext("ws", "/")
    assert read(elsewhere, path=str(other)).output == "   1\tabs"


def test_auto_approved(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("a\n")
    prep = read_file.prepare({"path": "f.txt"}, ctx)
    assert prep.needs_approval is False and prep.header == "read_file f.txt"


def test_header_names_the_lines(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("a\n")
    assert read_file.prepare({"path": "f.txt", "offset": 3, "limit": 5}, ctx).header == (
        "read_file f.txt (lines 3-7)"
    )


def test_marks_the_path_as_read_at_prepare(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("a\n")
    read_file.prepare({"path": "f.txt"}, ctx)
    assert ctx.read_paths == {os.path.realpath(tmp_path / "f.txt")}


def test_a_missing_file_is_not_marked_read(ctx):
    read_file.prepare({"path": "nope.txt"}, ctx)
    assert not ctx.read_paths


def test_output_over_the_truncation_limit_stops_at_a_line_with_a_note(tmp_path):
    ctx = ToolContext("ws", str(tmp_path), settings=ToolSettings(truncation=1000))
    (tmp_path / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 501)))
    output = read(ctx, path="big.txt").output
    assert len(output) <= 1000
    last = output.splitlines()[-2]
    shown = int(last.split("\t")[0])
    assert output.endswith(
        f"[stopped at line {shown} of 500 to stay within the output limit; read on with offset={shown + 1}]"
    )


def test_svg_is_read_as_text(ctx, tmp_path):
    (tmp_path / "icon.svg").write_text("<svg></svg>\n")
    ctx.model = VISION
    assert read(ctx, path="icon.svg").output == "   1\t<svg></svg>"


@pytest.mark.parametrize("ext", ["png", "jpg", "jpeg", "gif", "webp", "bmp", "tiff", "tif", "ico", "PNG"])
def test_images_are_image_content_when_the_model_has_vision(ctx, tmp_path, ext):
    (tmp_path / f"pic.{ext}").write_bytes(PNG)
    ctx.model = VISION
    outcome = read(ctx, path=f"pic.{ext}")
    content = images.image_content(outcome.output)
    assert content is not None and not outcome.is_error
    assert content["media_type"] == images.MEDIA_TYPES[f".{ext.lower()}"]
    assert base64.b64decode(content["data"]) == PNG
    assert content["size"] == len(PNG) and content["path"] == str(tmp_path / f"pic.{ext}")


def test_image_content_is_one_json_object(ctx, tmp_path):
    (tmp_path / "pic.png").write_bytes(PNG)
    ctx.model = VISION
    assert json.loads(read(ctx, path="pic.png").output)["type"] == "image"


def test_images_are_described_when_the_model_has_no_vision(ctx, tmp_path):
    (tmp_path / "pic.png").write_bytes(PNG)
    ctx.model = NO_VISION
    outcome = read(ctx, path="pic.png")
    assert not outcome.is_error and images.image_content(outcome.output) is None
    assert outcome.output.startswith(f"pic.png is an image (image/png, {len(PNG)} bytes)")
    assert "cannot view images" in outcome.output


def test_no_model_settings_means_no_vision(ctx, tmp_path):
    (tmp_path / "pic.png").write_bytes(PNG)
    assert "cannot view images" in read(ctx, path="pic.png").output


def test_image_over_4_mib_is_refused(ctx, tmp_path):
    (tmp_path / "big.png").write_bytes(b"\x89PNG" + b"\x00" * images.MAX_IMAGE_BYTES)
    ctx.model = VISION
    outcome = read(ctx, path="big.png")
    assert outcome.is_error and "images over 4 MiB" in outcome.output


def test_image_of_exactly_4_mib_is_read(ctx, tmp_path):
    (tmp_path / "edge.png").write_bytes(b"\x00" * images.MAX_IMAGE_BYTES)
    ctx.model = VISION
    assert images.image_content(read(ctx, path="edge.png").output) is not None


def test_ordinary_text_is_not_image_content():
    assert images.image_content('{"type": "image", "note": "not a marker"}') is None
    assert images.image_content("   1\thello") is None


@pytest.mark.timeout(10)
def test_a_fifo_is_refused_without_waiting_for_a_writer(ctx, tmp_path):
    os.mkfifo(tmp_path / "pipe")
    outcome = read(ctx, path="pipe")
    assert (
        outcome.is_error and outcome.output == "Error: pipe is not a regular file (a pipe, socket or device)"
    )
    assert not ctx.read_paths


def test_a_path_with_a_nul_character_is_refused(ctx):
    assert read(ctx, path="f\0.txt") == "Error: 'path' contains a NUL character, which no path can hold"


def test_offset_and_limit_apply_to_text_files_only(ctx, tmp_path):
    (tmp_path / "pic.png").write_bytes(PNG)
    ctx.model = VISION
    content = images.image_content(read(ctx, path="pic.png", offset=3, limit=1).output)
    assert content is not None and base64.b64decode(content["data"]) == PNG


def test_a_hosted_model_sees_images_by_default(ctx, tmp_path):
    (tmp_path / "pic.png").write_bytes(PNG)
    ctx.model = ModelSettings("m", "anthropic", "claude")
    assert images.image_content(read(ctx, path="pic.png").output) is not None


def test_without_vision_an_image_over_4_mib_is_still_described(ctx, tmp_path):
    (tmp_path / "big.png").write_bytes(b"\x00" * (images.MAX_IMAGE_BYTES + 1))
    ctx.model = NO_VISION
    outcome = read(ctx, path="big.png")
    assert not outcome.is_error and "cannot view images" in outcome.output


def test_an_image_is_marked_read_at_prepare(ctx, tmp_path):
    (tmp_path / "pic.png").write_bytes(PNG)
    read_file.prepare({"path": "pic.png"}, ctx)
    assert ctx.read_paths == {os.path.realpath(tmp_path / "pic.png")}


def test_a_bare_string_argument_is_the_path(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("bare\n")
    registry = build_registry()
    call = prepare_call(registry, "c1", "read_file", "f.txt", ctx)
    assert execute_call(registry, call, ctx).output == "   1\tbare"


def test_one_line_over_the_truncation_limit_keeps_its_head_and_tail(tmp_path):
    ctx = ToolContext("ws", str(tmp_path), settings=ToolSettings(truncation=1024))
    (tmp_path / "wide.txt").write_text("head" + "x" * 5000 + "tail\n")
    registry = build_registry()
    output = execute_call(
        registry, prepare_call(registry, "c1", "read_file", '{"path": "wide.txt"}', ctx), ctx
    )
    assert output.output.startswith("   1\thead") and output.output.endswith("tail")
    assert "characters cut from the middle of this output" in output.output
