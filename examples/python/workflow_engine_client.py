"""WorkflowEngineClient, a Python client of Baton's API.

The class WorkflowEngineClient below is kept exactly as first written,
unedited. It uses names it neither imports nor defines; the imports and
the exception class WorkflowEngineError above it are the only additions.
run_client.py shows how to use it.
"""
import time
import uuid
from datetime import datetime

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


class WorkflowEngineError(Exception):
    """A request Baton refused, or that failed: code is Baton's error code
    (e.g. workflow.execute.not_found), details its whole error envelope."""

    def __init__(self, message, code, details):
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = details


class WorkflowEngineClient:
    def __init__(self, base_url, tenant_id, api_key):
        self.base_url = base_url
        self.tenant_id = tenant_id
        self.session = self._create_session(api_key)
    
    def _create_session(self, api_key):
        session = requests.Session()
        session.headers.update({
            'Authorization': f'Bearer {api_key}',
            'X-Tenant-ID': self.tenant_id,
            'Content-Type': 'application/json'
        })
        
        # Configurar retry con backoff exponencial
        retry_strategy = Retry(
            total=3,
            backoff_factor=0.5,
            status_forcelist=[408, 429, 500, 502, 503, 504],
            allowed_methods=["GET", "POST", "PUT"]
        )
        adapter = HTTPAdapter(max_retries=retry_strategy)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        return session
    
    def execute_workflow(self, workflow_id, input_data):
        correlation_id = str(uuid.uuid4())
        request_id = str(uuid.uuid4())
        
        headers = {
            'X-Correlation-ID': correlation_id,
            'X-Request-ID': request_id,
            'X-Domain-Action': 'workflow.execute'
        }
        
        payload = {
            "message_id": str(uuid.uuid4()),
            "correlation_id": correlation_id,
            "type": {
                "domain": "workflow",
                "action": "execute"
            },
            "schema_version": "1.0",
            "created_at": datetime.utcnow().isoformat() + "Z",
            "source_service": "orchestrator",
            "target_service": "workflow-engine",
            "priority": 5,
            "payload": {
                "workflow_id": workflow_id,
                "input": input_data
            }
        }
        
        try:
            response = self.session.post(
                f"{self.base_url}/api/v1/workflow/execute",
                headers=headers,
                json=payload,
                timeout=10
            )
            response.raise_for_status()
            return response.json()
        except requests.exceptions.HTTPError as e:
            error_data = e.response.json()
            if 'error' in error_data and error_data['error'].get('retryable', False):
                # Implementar lógica de reintento específica si es necesario
                retry_after = error_data['error'].get('retry_after_ms', 5000) / 1000
                time.sleep(retry_after)
                return self.execute_workflow(workflow_id, input_data)
            else:
                # Propagar error con contexto mejorado
                raise WorkflowEngineError(
                    error_data.get('error', {}).get('message', 'Error desconocido'),
                    error_data.get('error', {}).get('code', 'unknown'),
                    error_data
                )
        except requests.exceptions.Timeout:
            # Manejar timeouts específicamente
            raise WorkflowEngineError(
                "Timeout al ejecutar el workflow",
                "workflow.execute.timeout",
                {"workflow_id": workflow_id}
            )
        except Exception as e:
            # Capturar y transformar otros errores
            raise WorkflowEngineError(
                f"Error inesperado: {str(e)}",
                "workflow.client.unexpected_error",
                {"exception": str(e)}
            )
