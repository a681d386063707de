"""`render.CompiledTemplates`: a template is compiled once and its code read back from
`disk_memo`'s folder after; a changed template, an unreadable entry or the cache turned off
compile afresh."""

from pathlib import Path

import jinja2
import pytest

from llmfleet import disk_memo
from llmfleet.outputs.render import CompiledTemplates


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LLMFLEET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LLMFLEET_CACHE", raising=False)
    return tmp_path / "cache" / "templates"


def rendered(folder: Path, text: str) -> tuple[str, int]:
    """The template rendered by a new environment (a new process's), and the compiles."""
    (folder / "t.j2").write_text(text)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)),
                             bytecode_cache=CompiledTemplates())
    compiles = 0
    compile_of = env.compile

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal compiles
        compiles += 1
        return compile_of(*args, **kwargs)  # type: ignore[arg-type]

    env.compile = counted  # type: ignore[method-assign]
    return env.get_template("t.j2").render(n=2), compiles


def test_a_template_is_compiled_once_and_read_back(tmp_path: Path, cache: Path) -> None:
    assert rendered(tmp_path, "{{ n * 21 }}") == ("42", 1)
    assert rendered(tmp_path, "{{ n * 21 }}") == ("42", 0)
    assert len(list(cache.glob("*.cache"))) == 1


def test_a_changed_template_is_compiled_again(tmp_path: Path, cache: Path) -> None:
    rendered(tmp_path, "{{ n * 21 }}")
    assert rendered(tmp_path, "{{ n * 2 }}") == ("4", 1)


def test_an_unreadable_entry_is_compiled_again(tmp_path: Path, cache: Path) -> None:
    rendered(tmp_path, "{{ n * 21 }}")
    [entry] = cache.glob("*.cache")
    entry.write_bytes(entry.read_bytes()[:-5])  # truncated
    assert rendered(tmp_path, "{{ n * 21 }}") == ("42", 1)


def test_off_compiles_every_time(tmp_path: Path, cache: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMFLEET_CACHE", "off")
    rendered(tmp_path, "{{ n * 21 }}")
    assert rendered(tmp_path, "{{ n * 21 }}") == ("42", 1)
    assert not cache.exists()


def test_another_llmfleet_compiles_again(tmp_path: Path, cache: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # environment()'s lexer settings live in llmfleet's files, which jinja's own check of
    # the template's source does not cover
    rendered(tmp_path, "{{ n * 21 }}")
    monkeypatch.setattr(disk_memo, "code_fingerprint", lambda: "another llmfleet")
    assert rendered(tmp_path, "{{ n * 21 }}") == ("42", 1)
