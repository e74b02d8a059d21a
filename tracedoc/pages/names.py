"""Kernel names short enough for a chart's axis or a table cell, and still telling kernels apart.

C++ kernel names run to hundreds of characters, mostly namespaces, casts, lambda chains and parameter lists; what
tells two instances of one template apart is usually one template argument (``AbsFunctor`` against
``CUDAFunctor_add``). So a name is first cleaned of the parts that say little (the return type, the namespaces of
the template arguments, ``(int)4`` casts, ``<unnamed>`` scopes, lambda chains, the parameters), then its nested
template arguments are cut level by level until it fits. ``kernel_labels`` shortens a set of names together: where
two of them come out alike, the template arguments they share are written '…' and the ones that differ are kept.
The full name is always one hover away (tooltip or ``title``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

ELLIPSIS = "…"
_ANONYMOUS = re.compile(r"(?:<unnamed>|\(anonymous namespace\))::")
_LAMBDA = re.compile(r"\[lambda\(([^()]*)\) \(instance \d+\)\]|\{lambda\(([^()]*)\)#\d+\}")
_LAMBDA_CHAIN = re.compile(r"::lambda(?:\([^()]*\))?::operator ?\(\)\(\) const::lambda")
_CAST = re.compile(r"\((?:(?:unsigned|signed|long|short|int|char|bool|size_t|std::size_t)\s*)+\)(?=-?\d)")
_QUALIFIER = re.compile(r"(?<![\w:])(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~])")
_SPACE_STAR = re.compile(r"\s+([*&])")
_CLOSE = re.compile(r">\s+>")
_INNER_VOID = re.compile(r"(<|,\s*)void\s+(?=[A-Za-z_])")


def short(name: object, limit: int = 48) -> str:
    """A name cut to ``limit`` characters (the full name is in the tooltip and the table)."""
    text = str(name)
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def is_cpp(name: str) -> bool:
    """Whether ``name`` reads as a C++ function or template (an identifier followed by '<' or '(')."""
    return bool(re.match(r"^(void\s+)?[A-Za-z_][\w:]*\s*[<(]", _ANONYMOUS.sub("", name)))


def cleaned(name: str) -> str:
    """``name`` without what says little: the return type, anonymous scopes, casts of numbers, lambda chains
    ('f(…)::lambda'), the namespaces inside the template arguments, spaces before '*' and '&'."""
    text = re.sub(r"^void\s+", "", name.strip())
    text = _INNER_VOID.sub(r"\1", _ANONYMOUS.sub("", text))
    text = _LAMBDA.sub(_lambda, text)
    while _LAMBDA_CHAIN.search(text):
        text = _LAMBDA_CHAIN.sub("::lambda", text)
    text = _lambda_owners_cut(text)
    text = _CAST.sub("", text)
    head, sep, rest = _split_head(text)
    rest = _QUALIFIER.sub("", rest)
    text = head + sep + rest
    text = _SPACE_STAR.sub(r"\1", text)
    while _CLOSE.search(text):
        text = _CLOSE.sub(">>", text)
    return text


def _lambda(match: re.Match[str]) -> str:
    """A lambda as 'lambda', with its parameter types when it has any ('lambda(float)')."""
    params = match.group(1) if match.group(1) is not None else match.group(2)
    return f"lambda({params})" if params and params.strip() else "lambda"


def _split_head(text: str) -> tuple[str, str, str]:
    """The kernel's own qualified name, and the rest from its first '<' or '(' on."""
    match = re.search(r"[<(]", text)
    if not match:
        return text, "", ""
    return text[: match.start()], "", text[match.start():]


def _lambda_owners_cut(text: str) -> str:
    """'f(at::TensorIteratorBase &)::lambda' → 'f(…)::lambda': the parameters of a function that holds a lambda."""
    out = text
    for _ in range(out.count("::lambda")):
        i = out.find(")::lambda")
        while i >= 0:
            start = _opening(out, i)
            if start is not None and i > start + 1 and out[start + 1:i] != ELLIPSIS:
                out = out[: start + 1] + ELLIPSIS + out[i:]
                break
            i = out.find(")::lambda", i + 1)
    return out


def _opening(text: str, close: int) -> int | None:
    """The index of the '(' that the ')' at ``close`` closes."""
    depth = 0
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return None


def parameters_cut(text: str) -> str:
    """``text`` with the parenthesised list it ends with (a function's parameters) written '(…)'."""
    if not text.endswith(")"):
        return text
    start = _opening(text, len(text) - 1)
    if start is None or start == 0 or start >= len(text) - 2:
        return text
    return text[:start] + "(" + ELLIPSIS + ")"


def templates_cut(text: str, keep: int) -> str:
    """``text`` with the template arguments nested deeper than ``keep`` levels written '…'."""
    if text.count("<") != text.count(">"):
        return text
    out, depth = [], 0
    for i, ch in enumerate(text):
        opens = ch == "<" and (depth > 0 or (i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_ ")))
        if opens:
            depth += 1
            if depth <= keep + 1:
                out.append("<" if depth <= keep else "<" + ELLIPSIS)
        elif ch == ">" and depth:
            if depth <= keep + 1:
                out.append(">")
            depth -= 1
        elif depth <= keep:
            out.append(ch)
    return "".join(out)


def _unqualified(text: str) -> str:
    """``text`` without the kernel's own namespaces ('at::native::f<…>' → 'f<…>')."""
    head, _, rest = _split_head(text)
    return head.rsplit("::", 1)[-1] + rest


def _depth(text: str) -> int:
    deepest = depth = 0
    for ch in text:
        depth += {"<": 1, ">": -1}.get(ch, 0)
        deepest = max(deepest, depth)
    return deepest


def candidates(name: str) -> list[str]:
    """Shorter forms of a C++ kernel name, most telling first: cleaned with every template level, then fewer
    levels; the same without the kernel's own namespaces; then the arguments up to the first type (an elementwise
    kernel's functor); last, every template argument written '<…>'."""
    body = parameters_cut(cleaned(name))
    levels = range(max(_depth(body), 1), 0, -1)
    out = [templates_cut(body, keep) for keep in levels]
    out += [_unqualified(form) for form in out]
    if (first := _up_to_first_type(body)) is not None:
        out += [first, _unqualified(first)]
    out += [templates_cut(body, 0), _unqualified(templates_cut(body, 0))]
    return list(dict.fromkeys(out))


def _up_to_first_type(text: str) -> str | None:
    """``text`` with its template arguments kept up to the first that is not a number (an elementwise kernel's
    functor: what tells it apart), nested ones cut to one level, and the others written '…'
    ('f<4, AbsFunctor<…>, …>(…)'); None when nothing would be left out."""
    parts = top_arguments(text)
    if parts is None:
        return None
    head, args, tail = parts
    typed = next((i for i, a in enumerate(args) if not re.fullmatch(r"-?\d+[a-z]*", a)), None)
    if typed is None or typed == len(args) - 1:
        return None
    kept = [templates_cut(a, 1) for a in args[: typed + 1]]
    return f"{head}<{', '.join(kept + [ELLIPSIS])}>{tail}"


def kernel_short(name: object, limit: int = 80) -> str:
    """A kernel name readable at a glance, at most ``limit`` characters where it can be: the most telling of its
    shorter forms (``candidates``) that fits ('void at::native::vectorized_elementwise_kernel<(int)4,
    at::native::AbsFunctor<c10::Half>, …>(int, T2, T3)' → 'at::native::vectorized_elementwise_kernel<4,
    AbsFunctor<…>, array<…>>(…)'). Names that are not C++ templates or calls, and short ones, stay as they are."""
    text = str(name)
    if len(text) <= limit or not is_cpp(text):
        return text
    forms = candidates(text)
    fitting = next((form for form in forms if len(form) <= limit), forms[-1])
    return fitting if len(fitting) < len(text) else text


def top_arguments(text: str) -> tuple[str, list[str], str] | None:
    """A cleaned name split at its first template's top-level commas: (what comes before its '<', the arguments,
    what follows its '>'); None when it has no template."""
    start = text.find("<")
    if start <= 0:
        return None
    args, depth, begin = [], 0, start + 1
    for i in range(start, len(text)):
        ch = text[i]
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth == 0:
                args.append(text[begin:i].strip())
                return text[:start], args, text[i + 1:]
        elif ch == "," and depth == 1:
            args.append(text[begin:i].strip())
            begin = i + 1
    return None


def _distinguished(names: list[str], limit: int) -> dict[str, str] | None:
    """Names that share one short form, each written with only the template arguments that tell them apart (the
    fewest positions that do; the others as '…'), their nesting cut as far as they stay apart and, where it can,
    within ``limit``; None when they are not instances of one template or nothing tells them apart."""
    parts = {n: top_arguments(parameters_cut(cleaned(n))) for n in names}
    if any(p is None for p in parts.values()) or len({p[0] for p in parts.values() if p}) != 1:
        return None
    split = {n: p for n, p in parts.items() if p}
    positions = _telling_positions([args for _, args, _ in split.values()])
    if positions is None:
        return None
    head = next(iter(split.values()))[0]
    forms: list[dict[str, str]] = []
    for shown_head in (head, _unqualified(head)):
        for keep in (99, 2, 1, 0):
            labels = {n: f"{shown_head}<{_arguments_text(args, positions, keep)}>{tail}"
                      for n, (_, args, tail) in split.items()}
            if len(set(labels.values())) == len(labels):
                forms.append(labels)
    if not forms:
        return None

    def longest(labels: dict[str, str]) -> int:
        return max(map(len, labels.values()))

    return next((f for f in forms if longest(f) <= limit), min(forms, key=longest))


def _telling_positions(arguments: list[list[str]]) -> set[int] | None:
    """The fewest argument positions (chosen greedily, most varied first) whose values tell every list apart."""
    count = max(map(len, arguments))

    def value(args: list[str], i: int) -> str | None:
        return args[i] if i < len(args) else None
    chosen: set[int] = set()
    for i in sorted(range(count), key=lambda i: -len({value(a, i) for a in arguments})):
        if len({tuple(value(a, j) for j in sorted(chosen)) for a in arguments}) == len(arguments):
            break
        chosen.add(i)
    unique = len({tuple(value(a, j) for j in sorted(chosen)) for a in arguments}) == len(arguments)
    return chosen if unique else None


def _arguments_text(args: list[str], positions: set[int], keep: int) -> str:
    """The arguments at ``positions`` (nesting cut below ``keep`` levels), each run of the others as '…'."""
    shown: list[str] = []
    for i, arg in enumerate(args):
        if i in positions:
            shown.append(templates_cut(arg, keep))
        elif not shown or shown[-1] != ELLIPSIS:
            shown.append(ELLIPSIS)
    return ", ".join(shown)


def kernel_labels(names: Iterable[object], limit: int = 80) -> dict[str, str]:
    """Each of ``names`` shortened (``kernel_short``) so that no two distinct names read alike: names that would
    are written with the template arguments that tell them apart, and, if even that leaves two alike, numbered
    ('… #2')."""
    distinct = list(dict.fromkeys(str(n) for n in names))
    labels = {n: kernel_short(n, limit) for n in distinct}
    for group in _collisions(labels):
        if (better := _distinguished(group, limit)) is not None:
            labels.update(better)
    for group in _collisions(labels):
        for i, name in enumerate(group[1:], 2):
            labels[name] = f"{labels[name]} #{i}"
    return labels


def _collisions(labels: dict[str, str]) -> list[list[str]]:
    """The groups of names (in their order) that share a label."""
    by_label: dict[str, list[str]] = defaultdict(list)
    for name, label in labels.items():
        by_label[label].append(name)
    return [group for group in by_label.values() if len(group) > 1]


def middle_cut(label: str, limit: int) -> str:
    """``label`` cut in the middle ('sm90_xmma_wgrad_…_kernel__5x_cudnn') to at most ``limit`` characters: what
    ``kernel_short`` leaves long (a cuDNN or CUTLASS kernel's plain name, no template to shorten) would otherwise
    widen a chart's axis until its bars have no room. Both ends kept: they tell such kernels apart."""
    if len(label) <= limit:
        return label
    head = (limit - 1) // 2
    return f"{label[:head]}…{label[len(label) - (limit - 1 - head):]}"
