"""Case lists of the conformance scripts (ops.txt, the expected-failures files): one or more case
names per line, then optionally `# reason`; blank lines and comment lines name nothing."""


def read_list(path):
    """{case name: the reason after '#' on its line ('' where none)}."""
    items = {}
    with open(path) as f:
        for line in f:
            body, _, comment = line.partition("#")
            for word in body.split():
                items[word] = comment.strip()
    return items
