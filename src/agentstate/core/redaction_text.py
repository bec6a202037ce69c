"""Where a secret sits in free text: names that hold one, and the phrasings that carry its value.

The key rules of :class:`agentstate.core.SecretRedactionMiddleware` (notebook
02): which field and argument names hold a secret (:data:`SECRET_NAME`), and
the free-text forms whose value is hidden (:func:`text_secrets`): ``name:
value``, ``name = value``, ``name is value`` (also ``name for admin is value``),
quoted or escaped-quoted keys, markdown-wrapped keys (``**Password**: x``,
``` `password`: x ```), ``<password>x</password>`` and the password of a URL
(``postgres://user:pw@host``). A form not listed here is caught only by the
value pass (``core.redaction_values``), once the value is known.
``docs/secrets.md`` has the table of what is covered.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Field and argument names that hold a secret whatever the tool calls them: anywhere in the
# name (``db_password``, ``PGPASSWORD``, ``api_key``, ``Authorization``), or ``pass``, ``pwd``
# and ``pw`` as a word of it (``DB_PASS``, ``mysqlPwd``, ``pwd``; not ``compass``, ``passenger``).
SECRET_NAME = re.compile(
    r"(?i:pass(?:word|wd|phrase|code)|secret|token|api[_-]?key|private[_-]?key|credential"
    r"|authorization)"
    r"|(?<![A-Za-z])(?:[Pp]ass|[Pp]wd|[Pp]w)(?![a-z])"  # a lower-case word: db_pass, Pwd
    r"|(?<=[a-z0-9])(?:Pass|Pwd|Pw)(?![a-z])"  # a camel-case word: dbPass, userPwd
    r"|(?<![A-Za-z])(?:PASS|PWD|PW)(?![A-Za-z])"  # an upper-case word: DB_PASS, MYSQL_PWD
)
_BARE_WORD = r"""[^\s,;}\]"'\\)][^\s,;}\])]*"""
_MARK = r"(?:\*\*|__|\*|`)"  # markdown around a key: **Password**, `password`
# ``"password": "x"``, ``password=x``, ``password: two words``, ``password is x``,
# ``**Password**: x``, ``--password=x``, ``the password for admin is x`` in free text; keys
# may be quoted or escaped-quoted (JSON inside a JSON string). A bare value runs over several
# words up to a line end, ``,``, ``;`` or the next ``name:`` pair; after a tight ``NAME=``
# (env-style, ``PGPASSWORD=x psql``) it is one word.
TEXT_PAIR = re.compile(
    rf"""(?<![\w$.-])(?P<key>(?:--?)?(?P<mk>{_MARK})?(?P<kq>\\?["'])?"""
    r"""(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?:\\?["'])?"""
    r"""(?:[ \t]+(?:for|of)[ \t]+[\w.@-]+)?(?P=mk)?"""
    rf"""(?:(?P<tight>=)(?=[^\s=])|\s*[:=]{_MARK}?\s*|[ \t]+is[ \t]+))"""
    r"""(?:\\"(?P<edq>.*?)\\"|"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>[^'\n]*)'"""
    # ``NAME=value`` (no space around ``=``, env-style): one word; else up to the line's end
    rf"""|(?P<bare>(?(tight){_BARE_WORD}"""
    rf"""|{_BARE_WORD}(?:[ \t]+(?![A-Za-z_][\w.-]*\s*[:=]){_BARE_WORD})*)))"""
)
# ``<password>x</password>``: an element whose name holds a secret, and its text.
XML_ELEMENT = re.compile(r"<(?P<tag>[A-Za-z_][\w.-]*)>(?P<value>[^<]*)</(?P=tag)>")
# ``scheme://user:password@host``: the password of a URL's user part.
URL_PASSWORD = re.compile(
    r"""(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'"]*:)(?P<value>[^\s/@'"]+)(?=@)"""
)


def pair_value(match: re.Match[str]) -> str:
    """The value of a :data:`TEXT_PAIR` match, without its quotes."""
    return next(match[g] for g in ("edq", "dq", "sq", "bare") if match[g] is not None)


def requote(match: re.Match[str], value: str, bare_quote: str = "") -> str:
    """The pair again with ``value``, quoted the way the original value was."""
    if value == pair_value(match) and not bare_quote:
        return match[0]
    if match["edq"] is not None:
        return f'{match["key"]}\\"{value}\\"'
    if match["dq"] is not None:
        return f'{match["key"]}"{value}"'
    if match["sq"] is not None:
        return f"{match['key']}'{value}'"
    return f"{match['key']}{bare_quote}{value}{bare_quote}"


def text_secrets(
    text: str,
    *,
    is_secret: Callable[[object], bool],
    is_ref: Callable[[object], bool],
    hide: Callable[[str, str], str],
    field_arg: str,
    value_arg: str,
) -> str:
    """``text`` with the value of every secret-looking pair, element and URL password hidden.

    ``hide(field, value)`` returns the value's reference; a value that already
    is a reference (``is_ref``) is left. A ``field_name``/``value`` pair whose
    field looks secret hides the ``value``.
    """

    def element(match: re.Match[str]) -> str:
        if not is_secret(match["tag"]) or is_ref(match["value"]) or not match["value"]:
            return match[0]
        return match[0].replace(f">{match['value']}<", f">{hide(match['tag'], match['value'])}<")

    def url(match: re.Match[str]) -> str:
        value = match["value"]
        return match[0] if is_ref(value) else match["head"] + hide("password", value)

    text = URL_PASSWORD.sub(url, XML_ELEMENT.sub(element, text))
    matches = list(TEXT_PAIR.finditer(text))
    if not matches:
        return text
    secret_field = next(
        (v for m in matches if m["name"] == field_arg and is_secret(v := pair_value(m))), None
    )

    def swap(match: re.Match[str]) -> str:
        name = match["name"]
        if is_secret(name):
            field = name
        elif secret_field is not None and name == value_arg:
            field = secret_field
        else:  # pairs inside a value: ``note: "password: x"``
            inner = text_secrets(
                pair_value(match),
                is_secret=is_secret,
                is_ref=is_ref,
                hide=hide,
                field_arg=field_arg,
                value_arg=value_arg,
            )
            return requote(match, inner)
        value = pair_value(match)
        if is_ref(value):
            return match[0]
        return requote(match, hide(field, value), bare_quote='"' if match["kq"] else "")

    return TEXT_PAIR.sub(swap, text)
