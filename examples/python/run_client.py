"""Starts a workflow on Baton with WorkflowEngineClient and prints the answer.

usage: run_client.py [--url URL] [--tenant TENANT] [--token TOKEN]
                     WORKFLOW_ID [INPUT_JSON]

The defaults suit `baton dev`: http://127.0.0.1:8080, tenant "dev", no
token (BATON_TOKEN, when set, is the token). Prints one JSON line:
{"ok": <Baton's answer>} and exits 0 when the execution started, or
{"error": {"code", "message"}} and exits 1 when the client raised
WorkflowEngineError.
"""
import argparse
import json
import os
import sys

from workflow_engine_client import WorkflowEngineClient, WorkflowEngineError


def main():
    parser = argparse.ArgumentParser(description="Start a workflow on Baton.")
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="Baton's base URL")
    parser.add_argument("--tenant", default="dev", help="the tenant (X-Tenant-ID)")
    parser.add_argument("--token", default=os.environ.get("BATON_TOKEN", ""), help="the API token (baton token --tenant T)")
    parser.add_argument("workflow_id")
    parser.add_argument("input", nargs="?", default="{}", help="the workflow's input, a JSON object")
    args = parser.parse_args()

    client = WorkflowEngineClient(args.url, args.tenant, args.token)
    try:
        result = client.execute_workflow(args.workflow_id, json.loads(args.input))
    except WorkflowEngineError as e:
        print(json.dumps({"error": {"code": e.code, "message": e.message}}))
        return 1
    print(json.dumps({"ok": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
