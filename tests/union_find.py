"""Single-machine union-find: the reference the distributed connected components are checked against."""


def union_find_components(edges):
    """{node: smallest node of its component} for every node that appears in `edges`."""
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v in edges:
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
    return {node: find(node) for node in list(parent)}
