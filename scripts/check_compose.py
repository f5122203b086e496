"""Checks docker-compose.yml as far as a machine without a Docker engine can: it must parse
as YAML, every service must have a build or an image, ports must be "HOST:PORT:PORT" or
"PORT:PORT" strings, and named volumes must be declared."""
import sys

import yaml


def main(path: str) -> int:
    with open(path) as f:
        doc = yaml.safe_load(f)
    errors = []
    services = doc.get("services") or {}
    if not services:
        errors.append("no services")
    declared = set((doc.get("volumes") or {}).keys())
    for name, svc in services.items():
        if "build" not in svc and "image" not in svc:
            errors.append(f"{name}: needs build or image")
        for p in svc.get("ports", []):
            parts = str(p).split(":")
            if len(parts) not in (2, 3) or not all(x.isdigit() for x in parts[-2:]):
                errors.append(f"{name}: bad port mapping {p!r}")
        for v in svc.get("volumes", []):
            source = str(v).split(":")[0]
            if not source.startswith((".", "/")) and source not in declared:
                errors.append(f"{name}: volume {source!r} is not declared")
        for dep in svc.get("depends_on", []):
            if dep not in services:
                errors.append(f"{name}: depends on unknown service {dep!r}")
    for e in errors:
        print(f"{path}: {e}", file=sys.stderr)
    print(f"{path}: {len(services)} service(s), {'ok' if not errors else 'INVALID'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docker-compose.yml"))
