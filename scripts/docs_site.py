"""MkDocs hooks and a Griffe extension that build tether's documentation site.

* :func:`on_files` adds one generated API-reference page per public tether module (found by
  walking ``src/tether``, so new modules appear without editing a list) and puts them, and
  any page of ``docs/`` that ``mkdocs.yml`` does not list, into the navigation.
* :class:`SphinxRoles` lets the docstrings keep their reStructuredText habits: roles such as
  ``:class:`~tether.store.Store``` become cross-references (a target that does not exist
  fails the strict build) and a paragraph ending in ``::`` introduces a code block.

``mkdocs.yml`` names this file under ``hooks`` and under the Python handler's Griffe
``extensions``.
"""

from __future__ import annotations

import builtins
import importlib.util
import logging
import pathlib
import re
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / 'src' / 'tether'
REFERENCE = 'reference'

log = logging.getLogger('mkdocs.hooks.tether')


def public_modules(src: pathlib.Path = SRC) -> list[str]:
    """Dotted names of tether's public modules: no part of the path starts with ``_``."""
    names = []
    for path in sorted(src.rglob('*.py')):
        parts = list(path.relative_to(src.parent).with_suffix('').parts)
        if parts[-1] == '__init__':
            parts.pop()
        if not any(p.startswith('_') for p in parts):
            names.append('.'.join(parts))
    return sorted(names)


def reference_page(module: str) -> tuple[str, str]:
    """The source path (inside ``docs/``) and Markdown of ``module``'s reference page."""
    path = f'{REFERENCE}/{module.replace(".", "/")}.md'
    return path, f'# `{module}`\n\n::: {module}\n'


def reference_nav(modules: list[str]) -> list[Any]:
    """The navigation of the reference pages: a section per package, its page first."""
    packages = {m.rsplit('.', 1)[0] for m in modules if '.' in m}

    def children(parent: str) -> list[Any]:
        entries: list[Any] = []
        for m in modules:
            if m.rsplit('.', 1)[0] != parent or m == parent:
                continue
            page = {m: reference_page(m)[0]}
            entries.append({m: [page, *children(m)]} if m in packages else page)
        return entries

    return [{modules[0]: reference_page(modules[0])[0]}, *children(modules[0])]


# MkDocs hooks -----------------------------------------------------------------------------


def _listed(nav: Any) -> set[str]:
    """The page paths a ``nav`` configuration names."""
    found: set[str] = set()
    if isinstance(nav, str):
        found.add(nav)
    elif isinstance(nav, dict):
        for value in nav.values():
            found |= _listed(value)
    elif isinstance(nav, list):
        for item in nav:
            found |= _listed(item)
    return found


def on_files(files: Any, config: Any) -> Any:
    """Add the reference pages, then list them and any unlisted page in the navigation."""
    from mkdocs.structure.files import File

    modules = public_modules()
    for module in modules:
        path, text = reference_page(module)
        files.append(File.generated(config, path, content=text))
    reference = reference_nav(modules)
    nav = config['nav']
    if nav is not None:
        listed = _listed(nav)
        extra = sorted(
            f.src_uri
            for f in files.documentation_pages()
            if f.src_uri not in listed and not f.src_uri.startswith(f'{REFERENCE}/')
        )
        if extra:
            log.info('pages not in the nav of mkdocs.yml, listed under "More": %s', extra)
            nav.append({'More': extra})
        nav.append({'API reference': reference})
    return files


# Griffe extension ---------------------------------------------------------------------------

_ROLE = re.compile(r':(?:py:)?(?:class|meth|func|mod|attr|exc|data|obj|const):`(?P<body>[^`]+)`')
_TITLED = re.compile(r'(?s)(?P<title>.*?)\s*<(?P<target>[^>]+)>')
_LITERAL = re.compile(r'(?m)^(?P<text>.*?)\s?::[ \t]*$')


def _external(target: str) -> bool:
    """Whether ``target`` names something the reference does not render.

    That is a private name (tether's internals), a Python builtin (``TypeError``, ``set``:
    there is no Python inventory to link them to), or a name in the standard library or a
    third-party package: those are shown as code, not linked.
    """
    parts = target.split('.')
    if len(parts) == 1 and hasattr(builtins, target):
        return True
    if any(p.startswith('_') and not p.startswith('__') for p in parts):
        return True
    first = parts[0]
    if first == 'tether':
        return False
    return first in sys.stdlib_module_names or (
        len(parts) > 1 and first.islower() and importlib.util.find_spec(first) is not None
    )


def _role(m: re.Match[str]) -> str:
    body = m['body']
    titled = _TITLED.fullmatch(body)
    if titled:
        title, target = ' '.join(titled['title'].split()), titled['target'].strip()
    else:
        target = body.strip()
        title = ''
    tilde = target.startswith('~')
    target = target.lstrip('~.')
    call = ''
    if target.endswith('()'):
        target, call = target[:-2], '()'
    if not title:
        title = f'`{(target.rsplit(".", 1)[-1] if tilde else target)}{call}`'
    if _external(target):
        return title if title.startswith('`') else f'{title} (`{target}`)'
    return f'[{title}][{target}]'


def _literal(m: re.Match[str]) -> str:
    text = m['text']
    return f'{text}:' if text.strip() else ''


def convert_docstring(text: str) -> str:
    """Turn reStructuredText roles and ``::`` into what mkdocstrings renders."""
    return _LITERAL.sub(_literal, _ROLE.sub(_role, text))


try:
    import griffe
except ImportError:  # pragma: no cover - only the docs build needs griffe
    pass
else:

    class SphinxRoles(griffe.Extension):
        """Convert every docstring with :func:`convert_docstring`."""

        def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
            if obj.docstring is not None:
                obj.docstring.value = convert_docstring(obj.docstring.value)
