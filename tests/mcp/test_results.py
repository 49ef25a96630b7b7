"""MCP call results as observation text, on the SDK's own content models."""

from __future__ import annotations

import base64
import json

import mcp_types as types

from miniagent.mcp.results import describe_size, result_text


def result(*content: object, structured: dict[str, object] | None = None,
           is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured,  # type: ignore[arg-type]
                                is_error=is_error)


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_text_parts_are_joined() -> None:
    assert result_text(result(text("一行"), text("two"))) == "一行\ntwo"


def test_structured_content_is_preferred_over_its_text_copy() -> None:
    out = result_text(result(text('{"t": 1}'), structured={"t": 1, "城市": "東京"}))
    assert out == '{"t": 1, "城市": "東京"}'


def test_an_image_is_described_by_type_and_size() -> None:
    data = base64.b64encode(b"\x89PNG" + b"\0" * 5_000_000).decode()
    out = result_text(result(text("look:"), types.ImageContent(type="image", data=data,
                                                                mime_type="image/png")))
    assert out == "look:\n[image: image/png, 5.0 MB]"


def test_audio_and_blob_resources_are_described() -> None:
    audio = types.AudioContent(type="audio", data=base64.b64encode(b"x" * 2048).decode(),
                               mime_type="audio/wav")
    blob = types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
        uri="file:///a.bin", blob=base64.b64encode(b"abc").decode(),
        mime_type="application/octet-stream"))
    assert result_text(result(audio, blob)) == (
        "[audio: audio/wav, 2.0 kB]\n[resource file:///a.bin: application/octet-stream, "
        "3 bytes]")


def test_text_resources_keep_their_text_and_links_are_listed() -> None:
    embedded = types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
        uri="file:///notes.txt", text="hello", mime_type="text/plain"))
    link = types.ResourceLink(type="resource_link", name="Report", uri="https://x/r.pdf",
                              mime_type="application/pdf", size=12_345)
    assert result_text(result(embedded, link)) == (
        "[resource file:///notes.txt]\nhello\n"
        "[resource link: Report <https://x/r.pdf> (application/pdf, 12.3 kB)]")


def test_sizes() -> None:
    assert [describe_size(n) for n in (0, 999, 1000, 1_234_567)] == [
        "0 bytes", "999 bytes", "1.0 kB", "1.2 MB"]


# -- structured content that only wraps the content, or carries binary --------------------

PNG = base64.b64encode(b"\x89PNG" + bytes(range(256)) * 20_000).decode()  # 5.1 MB of image
PNG_TEXT = "[image: image/png, 5.1 MB]"


def png() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


def test_structured_content_wrapping_the_text_gives_the_plain_text() -> None:
    """server-filesystem's read_text_file: {"content": <the text>}; the MCP SDK's own servers:
    {"result": <the value>} next to the value's text."""
    assert result_text(result(text('第一行\n"quoted"'),
                              structured={"content": '第一行\n"quoted"'})) == '第一行\n"quoted"'
    assert result_text(result(text("1234"), structured={"result": 1234})) == "1234"
    assert result_text(result(text("slept 0.0"), structured={"result": "slept 0.0"})) == (
        "slept 0.0")


def test_structured_content_wrapping_the_parts_describes_the_binary_ones() -> None:
    """server-filesystem's read_media_file: {"content": [<the image part>]}."""
    image = png()
    wrapped = {"content": [image.model_dump(by_alias=True, mode="json")]}
    assert result_text(result(image, structured=wrapped)) == PNG_TEXT


def test_no_base64_reaches_the_observation_from_structured_content() -> None:
    mirrored = {"path": "/tmp/a.png", "base64": PNG, "size": 5_120_004}
    out = result_text(result(png(), structured=mirrored))
    assert out == ('{"path": "/tmp/a.png", "base64": "' + PNG_TEXT + '", "size": 5120004}\n'
                   + PNG_TEXT)
    audio = base64.b64encode(b"RIFF" * 600).decode()
    shaped = {"files": [{"name": "a.wav", "mimeType": "audio/wav", "data": audio},
                        {"type": "image", "data": PNG},
                        {"uri": "file:///b.bin", "blob": PNG}],
              "preview": "data:image/png;base64," + PNG, "note": "二つ"}
    out = result_text(result(structured=shaped))
    assert PNG[:40] not in out and audio[:40] not in out
    assert json.loads(out) == {"files": ["[data: audio/wav, 2.4 kB]",
                                         "[image: application/octet-stream, 5.1 MB]",
                                         "[blob: application/octet-stream, 5.1 MB]"],
                               "preview": "[data: image/png, 5.1 MB]", "note": "二つ"}


def test_structured_content_of_its_own_is_kept() -> None:
    """One key whose value is not the text (or not the parts): the structured content is the
    answer."""
    assert result_text(result(text("see the data"), structured={"rows": [1, 2]})) == (
        '{"rows": [1, 2]}')
    other = {"items": [{"type": "text", "text": "另一个"}]}
    assert result_text(result(text("summary"), structured=other)) == (
        '{"items": [{"type": "text", "text": "另一个"}]}')


def test_text_nested_past_the_parser_does_not_break_the_result() -> None:
    from types import SimpleNamespace

    deep = "[" * 100_000 + "]" * 100_000
    result = SimpleNamespace(content=[SimpleNamespace(type="text", text=deep)],
                             structured_content={"value": 1}, is_error=False)
    assert result_text(result) == '{"value": 1}'  # the structured content, as for any text
