#!/usr/bin/env python3
"""Drive cwcoded over its Unix socket with plain HTTP and only the standard library."""
import http.client, json, os, socket, time

HOME = os.environ.get("CWCODE_HOME") or os.path.expanduser("~/.cwcode")
SOCKET = os.environ.get("CWCODE_SOCKET") or os.path.join(HOME, "cwcoded.sock")

class UnixConnection(http.client.HTTPConnection):
    def __init__(self, socket_path):
        super().__init__("localhost", timeout=30)
        self.socket_path = socket_path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)

def call(method, **params):
    conn = UnixConnection(SOCKET)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    conn.request("POST", "/", body, {"Content-Type": "application/json"})
    answer = json.loads(conn.getresponse().read())
    conn.close()
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']['message']} ({answer['error']['code']})")
    return answer["result"]

if __name__ == "__main__":
    print("cwcoded", call("daemon/info")["version"])
    session = call("session/create", cwd=os.getcwd(), mode="plan")
    turn = call("session/send", sessionId=session["id"], text="Summarise README.md")["turn"]
    while call("session/get", sessionId=session["id"])["status"] != "idle":
        time.sleep(0.5)
    print(f"turn {turn} done; cost so far:", call("session/cost", sessionId=session["id"])["total"])
    print("read the answer: cwcode-cli events", session["id"])
