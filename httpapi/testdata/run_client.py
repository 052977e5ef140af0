"""Drives seed 003's WorkflowEngineClient (section 7.6), copied verbatim into
workflow_engine_client.py, against a Baton server.

The seed's snippet uses names it does not import or define (requests, Retry,
HTTPAdapter, uuid, datetime, time, WorkflowEngineError); this driver provides
them and runs the snippet unchanged.

usage: run_client.py BASE_URL TENANT TOKEN WORKFLOW_ID INPUT_JSON
Prints one JSON line: {"ok": response} or {"error": {"code", "message"}}.
"""
import json
import os
import sys
import time
import uuid
from datetime import datetime

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


class WorkflowEngineError(Exception):
    def __init__(self, message, code, details):
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = details


def main():
    base_url, tenant, token, workflow_id, input_json = sys.argv[1:6]
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "workflow_engine_client.py"), encoding="utf-8") as f:
        exec(compile(f.read(), "workflow_engine_client.py", "exec"), globals())
    client = WorkflowEngineClient(base_url, tenant, token)  # noqa: F821 (defined by the seed's code)
    try:
        result = client.execute_workflow(workflow_id, json.loads(input_json))
        print(json.dumps({"ok": result}))
    except WorkflowEngineError as e:
        print(json.dumps({"error": {"code": e.code, "message": e.message}}))


if __name__ == "__main__":
    main()
