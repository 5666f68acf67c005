"""What curl, wget and ``gh api`` send beyond the sandbox, from their options' values.

Fetching is not beyond the sandbox: a request that only reads (an HTTP GET, HEAD or OPTIONS; an
FTP, SFTP or SCP download) changes nothing there that a second run would repeat. What the
options say is sent is (an ``effects-beyond`` reason, :attr:`Analysis.effects_beyond`):

- ``curl``: a method other than GET, HEAD or OPTIONS (``-X``/``--request``, or one whose value
  is not known from the text); without one, data (``-d`` and the other ``--data`` options,
  ``--json``, ``-F``/``--form``), which makes the request a POST unless ``-G``/``--get`` puts
  it in the URL's query, and ``-T``/``--upload-file`` (a PUT or an upload); FTP commands
  (``-Q``/``--quote``), mail (``--mail-rcpt``); and a URL whose scheme sends or changes
  something by itself (``smtp://``, ``imap://``, whose fetching marks mail read,
  ``telnet://``, ``gopher://``, ``ws://``), or whose scheme is not known from the text. curl
  guesses the scheme of a URL without one from its host (``smtp.example.com``), and so is it
  read here.
- ``wget``: ``--post-data``, ``--post-file``, ``--body-data``, ``--body-file`` (a POST) without
  a ``--method``, or a ``--method`` other than GET, HEAD or OPTIONS.
- ``gh api``: ``-X``/``--method`` other than GET, HEAD or OPTIONS; without one, fields
  (``-f``/``--raw-field``, ``-F``/``--field``) or ``--input``, which make it a POST.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from ._words import Word

__all__ = ["sends"]

_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_CURL_METHOD: Final = frozenset({"-X", "--request"})
_CURL_DATA: Final = frozenset(
    {
        "-d",
        "--data",
        "--data-raw",
        "--data-binary",
        "--data-ascii",
        "--data-urlencode",
    }
)
_CURL_POST: Final = frozenset({"--json", "-F", "--form", "--form-string"})
_CURL_UPLOAD: Final = frozenset({"-T", "--upload-file"})
_CURL_GET: Final = frozenset({"-G", "--get"})
_CURL_SENDING: Final = frozenset({"-Q", "--quote", "--mail-rcpt", "--mail-from"})
# Schemes whose requests only read, as curl sends them without data or a method.
_FETCHING: Final = frozenset(
    "http https ftp ftps sftp scp file tftp ldap ldaps dict pop3 pop3s rtsp smb smbs mqtt".split()
)
# curl's guess for a URL without a scheme, from the beginning of its host.
_GUESSED: Final = {
    "ftp.": "ftp",
    "dict.": "dict",
    "ldap.": "ldap",
    "imap.": "imap",
    "smtp.": "smtp",
    "pop3.": "pop3",
}
_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_WGET_METHOD: Final = "--method"
_WGET_POST: Final = frozenset({"--post-data", "--post-file", "--body-data", "--body-file"})
_GH_METHOD: Final = frozenset({"-X", "--method"})
_GH_FIELDS: Final = frozenset({"-f", "--raw-field", "-F", "--field", "--input"})

Values = Sequence[tuple[str, str, Word]]


def sends(program: str, present: set[str], values: Values, operands: Sequence[Word]) -> str | None:
    """Why the request the program ``program`` (``curl``, ``wget``, ``gh api``) is told to
    send goes beyond the sandbox, or None if it only fetches (or the program is none of
    those)."""
    if program == "curl":
        return _curl(present, values, operands)
    if program == "wget":
        return _with_data(present, values, {_WGET_METHOD}, _WGET_POST, "it sends data")
    if program == "gh api":
        return _with_data(present, values, _GH_METHOD, _GH_FIELDS, "it sends fields")
    return None


def _method(present: set[str], values: Values, options: set[str] | frozenset[str]) -> str | None:
    """The method the options name: ``""`` if one is given but not known from the text,
    None if none is given."""
    given = [word.text for _, option, word in values if option in options]
    if given:
        method = given[-1]
        return "" if method is None else method
    return "" if present & options else None


def _unsafe(method: str) -> str:
    return f"it sends a request whose method is {method or 'not known'}"


def _with_data(
    present: set[str],
    values: Values,
    methods: set[str] | frozenset[str],
    data: frozenset[str],
    saying: str,
) -> str | None:
    method = _method(present, values, methods)
    if method is not None:
        return None if method in _SAFE_METHODS else _unsafe(method)
    if present & data:
        return f"{saying} (a POST request)"
    return None


def _curl(present: set[str], values: Values, operands: Sequence[Word]) -> str | None:
    if present & _CURL_SENDING:
        return "it sends mail or FTP commands"
    method = _method(present, values, _CURL_METHOD)
    if method is not None and method not in _SAFE_METHODS:
        return _unsafe(method)
    if method is None:
        if present & _CURL_UPLOAD:
            return "it uploads a file (a PUT request)"
        if present & _CURL_POST or (present & _CURL_DATA and not present & _CURL_GET):
            return "it sends data (a POST request)"
    urls = [*operands, *(word for _, option, word in values if option == "--url")]
    for url in urls:
        scheme = _scheme(url)
        if scheme is None:
            return f"it sends a request to a URL not known from the text ({url.raw})"
        if scheme not in _FETCHING:
            return f"it sends a {scheme}:// request, which changes the server's state"
    return None


def _scheme(url: Word) -> str | None:
    """The scheme curl uses for ``url``, or None if it is not known from the text."""
    text = url.text if url.text is not None else url.prefix
    found = _SCHEME.match(text)
    if found is not None:
        return found.group(1).lower()
    if url.text is None and "://" not in text and not _host_known(text):
        return None
    host = text.lower()
    for start, scheme in _GUESSED.items():
        if host.startswith(start):
            return scheme
    return "http"


def _host_known(prefix: str) -> bool:
    """True if a URL's known beginning holds its whole host (and so curl's guess of its
    scheme): a ``/`` or ``:`` ends the host."""
    return "/" in prefix or ":" in prefix
