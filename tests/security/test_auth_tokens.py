"""Token configuration: both forms, the errors (which never quote a token), the table's
lookup, and that settings never show a token."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from service.auth import Role, TokenTable, parse_tokens
from service.settings import Settings

SECRET = "s3cr3t-Token_value.~+/=="  # every b64token character class


def _plain(pairs: list[tuple[Role, SecretStr]]) -> list[tuple[Role, str]]:
    return [(role, token.get_secret_value()) for role, token in pairs]


def test_environment_form() -> None:
    pairs = parse_tokens(f" admin:{SECRET} , worker:w1,events:e1, read:r1 ", one_per_line=False)
    assert _plain(pairs) == [
        (Role.ADMIN, SECRET),
        (Role.WORKER, "w1"),
        (Role.EVENTS, "e1"),
        (Role.READ, "r1"),
    ]


def test_file_form_skips_blank_lines_and_comments() -> None:
    text = f"# operators\nadmin:{SECRET}\n\n  worker:w1  \n# workers\nworker:w2\n"
    assert _plain(parse_tokens(text, one_per_line=True)) == [
        (Role.ADMIN, SECRET),
        (Role.WORKER, "w1"),
        (Role.WORKER, "w2"),
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f"admin:{SECRET},{SECRET}", "pair 2: expected role:token"),
        (f"admin:{SECRET},wroker:abc", "pair 2: unknown role"),
        (f"{SECRET}:admin", "pair 1: unknown role"),  # swapped: the token is not quoted
        ("admin:", "pair 1: the token is empty"),
        (f"admin:{SECRET} x", "pair 1: the token is empty or holds characters"),
        (f'admin:"{SECRET}"', "pair 1: the token is empty or holds characters"),
    ],
)
def test_malformed_pairs_are_refused_without_quoting_them(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        parse_tokens(text, one_per_line=False)
    assert SECRET not in str(caught.value) and "abc" not in str(caught.value)


def test_table_finds_each_role_and_nothing_else() -> None:
    table = TokenTable(parse_tokens("admin:a1,worker:w1,worker:w2,read:r", one_per_line=False))
    assert table.enabled and len(table) == 4
    assert [table.role_of(t) for t in ("a1", "w1", "w2", "r")] == [
        Role.ADMIN,
        Role.WORKER,
        Role.WORKER,
        Role.READ,
    ]
    for other in ("", "a", "a1 ", "A1", "w1w1", "r" * 1000, "ü"):
        assert table.role_of(other) is None
    assert not TokenTable().enabled and TokenTable().role_of("a1") is None


def test_a_token_listed_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        TokenTable(parse_tokens("admin:same,read:same", one_per_line=False))


def test_settings_read_both_sources_and_never_show_a_token(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"worker:{SECRET}\n")
    settings = Settings(auth_tokens=SecretStr("admin:adm-tok-9"), auth_tokens_file=path)
    assert _plain(settings.auth_pairs()) == [(Role.ADMIN, "adm-tok-9"), (Role.WORKER, SECRET)]
    shown = f"{settings!r} {settings} {settings.model_dump()} {settings.model_dump_json()}"
    assert "adm-tok-9" not in shown and SECRET not in shown


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "cannot read .*No such file"),
        ("", "holds no role:token pair"),
        ("# only a comment\n", "holds no role:token pair"),
        ("admin:a1\nnobody:x\n", "line 2: unknown role"),
    ],
)
def test_bad_token_files_are_refused(tmp_path: Path, content: str | None, reason: str) -> None:
    path = tmp_path / "tokens"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValidationError, match=reason):
        Settings(auth_tokens_file=path)


def test_an_empty_token_variable_is_refused() -> None:
    # set but empty would silently turn authentication off
    with pytest.raises(ValidationError, match="holds no role:token pair"):
        Settings(auth_tokens=SecretStr(" , "))


def test_a_token_in_both_sources_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("read:same\n")
    with pytest.raises(ValidationError, match="listed twice"):
        Settings(auth_tokens=SecretStr("admin:same"), auth_tokens_file=path)
