"""Grep's ``type`` filter: ripgrep's names for kinds of files (``py``, ``js``, ``rust``...).

Each name stands for globs on a file's name, as ``rg --type-list`` prints them (the common
ones; a model that asks for another is told which there are).
"""

from __future__ import annotations

import fnmatch
import re
from typing import Final

from .._errors import ToolError

__all__ = ["FILE_TYPES", "type_matcher"]

FILE_TYPES: Final[dict[str, tuple[str, ...]]] = {
    "c": ("*.[chH]", "*.[chH].in", "*.cats"),
    "cpp": ("*.[ChH]", "*.cc", "*.[ch]pp", "*.[ch]xx", "*.hh", "*.inl", "*.[ChH].in"),
    "cs": ("*.cs",),
    "css": ("*.css", "*.scss"),
    "go": ("*.go",),
    "h": ("*.h", "*.hh", "*.hpp"),
    "html": ("*.htm", "*.html", "*.ejs"),
    "java": ("*.java", "*.jsp", "*.jspx", "*.properties"),
    "js": ("*.js", "*.jsx", "*.vue", "*.cjs", "*.mjs"),
    "json": ("*.json", "composer.lock", "*.sarif"),
    "jsonl": ("*.jsonl",),
    "kotlin": ("*.kt", "*.kts"),
    "lua": ("*.lua",),
    "make": ("[Gg][Nn][Uu]makefile", "[Mm]akefile", "*.mk", "*.mak"),
    "markdown": ("*.markdown", "*.md", "*.mdown", "*.mdwn", "*.mkd", "*.mkdn", "*.mdx"),
    "md": ("*.markdown", "*.md", "*.mdown", "*.mdwn", "*.mkd", "*.mkdn", "*.mdx"),
    "php": ("*.php", "*.php3", "*.php4", "*.php5", "*.phtml"),
    "py": ("*.py", "*.pyi"),
    "rb": ("*.rb", "*.gemspec", "Gemfile", ".irbrc", "Rakefile"),
    "rst": ("*.rst",),
    "ruby": ("*.rb", "*.gemspec", "Gemfile", ".irbrc", "Rakefile"),
    "rust": ("*.rs",),
    "scala": ("*.scala", "*.sbt"),
    "sh": ("*.bash", "*.sh", "*.zsh", ".bashrc", ".bash_profile", ".zshrc", ".profile"),
    "sql": ("*.sql", "*.psql"),
    "swift": ("*.swift",),
    "toml": ("*.toml", "Cargo.lock"),
    "ts": ("*.ts", "*.tsx", "*.cts", "*.mts"),
    "txt": ("*.txt",),
    "xml": ("*.xml", "*.xml.dist", "*.xsd", "*.xsl", "*.xslt", "*.svg"),
    "yaml": ("*.yaml", "*.yml"),
}


def type_matcher(name: str) -> re.Pattern[str]:
    """One expression matching the file names of type ``name`` (``fullmatch`` a name)."""
    globs = FILE_TYPES.get(name)
    if globs is None:
        raise ToolError(
            f"type {name!r} is not a known file type; the types are {', '.join(FILE_TYPES)} "
            f"(or filter with glob, e.g. glob='*.{name}')"
        )
    # fnmatch.translate gives "(?s:...)\Z"; fullmatch makes the anchor redundant but harmless.
    return re.compile("|".join(fnmatch.translate(glob) for glob in globs))
