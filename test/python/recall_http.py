"""A memgate recall from Python over the HTTP API, with an API key and the standard library only.

Prints the response body (JSON), or the error body with the HTTP status when refused.
"""

import json
import sys
import urllib.error
import urllib.request


def recall(base_url: str, key: str, agent_id: str, query: str) -> dict:
    request = urllib.request.Request(
        f"{base_url}/v1/agents/{agent_id}/recall",
        data=json.dumps({"query": query, "k": 5}).encode(),
        headers={"content-type": "application/json", "authorization": f"Bearer {key}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as err:
        return {"status": err.code, **json.load(err)}


if __name__ == "__main__":
    print(json.dumps(recall(*sys.argv[1:5])))
