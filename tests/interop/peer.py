#!/usr/bin/env python3
"""dpctl's interop peer: the kubelet device-plugin and PodResources APIs on
grpcio (grpc-core, C), a gRPC stack independent of tonic/h2.

Stubs are generated from dpctl's own proto/ tree with grpcio-tools into a
cache directory on first use. Every subcommand prints JSON lines on stdout
(one per event) so that the Rust tests can wait for readiness by reading.

  peer.py call    --socket S --authority MODE --rpc options|list|allocate|podresources-list|register ...
  peer.py plugin  --dir D --resource R --devices N --authority MODE [--no-register]
  peer.py kubelet --dir D --authority MODE [--count N]
  peer.py podresources --socket S --data FILE   (a PodResources v1 server)

--authority picks the HTTP/2 :authority grpc-core sends for a unix socket:
  localhost     "localhost" (what kubelets >= 1.26 send)
  path          the raw socket path (grpc-go dialing a bare path; kubelets <= 1.25)
  grpc-default  grpc-core's own choice: the percent-encoded path
"""
import argparse
import fcntl
import hashlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))
PROTOS = [
    "deviceplugin/v1beta1/api.proto",
    "podresources/v1/api.proto",
    "pluginregistration/v1/api.proto",
]


def gen_dir():
    """Generates the Python stubs once per proto content, under a lock.

    The cache is keyed by the protos' bytes, not their mtimes, so every
    checkout of the same protos shares one directory instead of leaving one
    more in the temp dir per clone."""
    digest = hashlib.sha256()
    for p in PROTOS:
        with open(os.path.join(PROTO_ROOT, p), "rb") as f:
            digest.update(f.read())
    stamp = digest.hexdigest()[:16]
    out = os.path.join(tempfile.gettempdir(), "dpctl-interop-gen-%d-%s" % (os.getuid(), stamp))
    if os.path.isdir(os.path.join(out, "done")):
        return out
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isdir(os.path.join(out, "done")):
            from grpc_tools import protoc

            for p in PROTOS:
                rc = protoc.main(["protoc", "-I" + PROTO_ROOT, "--python_out=" + out, "--grpc_python_out=" + out, p])
                if rc != 0:
                    raise SystemExit("protoc failed for %s" % p)
            os.makedirs(os.path.join(out, "done"))
    return out


sys.path.insert(0, gen_dir())
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402

from deviceplugin.v1beta1 import api_pb2 as dp, api_pb2_grpc as dp_grpc  # noqa: E402
from podresources.v1 import api_pb2 as pr, api_pb2_grpc as pr_grpc  # noqa: E402


def emit(event, **kw):
    kw["event"] = event
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def as_dict(msg):
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def channel(path, authority):
    opts = [("grpc.max_receive_message_length", 16 * 1024 * 1024)]
    if authority == "localhost":
        opts.append(("grpc.default_authority", "localhost"))
    elif authority == "path":
        opts.append(("grpc.default_authority", os.path.abspath(path)))
    elif authority != "grpc-default":
        raise SystemExit("unknown authority mode %r" % authority)
    return grpc.insecure_channel("unix://" + os.path.abspath(path), options=opts)


def rpc_error(e):
    return {"code": e.code().name, "details": e.details()}


# ---------------------------------------------------------------- call

def cmd_call(a):
    ch = channel(a.socket, a.authority)
    try:
        grpc.channel_ready_future(ch).result(timeout=a.timeout)
        if a.rpc == "options":
            r = dp_grpc.DevicePluginStub(ch).GetDevicePluginOptions(dp.Empty(), timeout=a.timeout)
        elif a.rpc == "list":
            stream = dp_grpc.DevicePluginStub(ch).ListAndWatch(dp.Empty(), timeout=a.timeout)
            r = next(iter(stream))
            stream.cancel()
        elif a.rpc == "allocate":
            req = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=a.devices.split(","))])
            r = dp_grpc.DevicePluginStub(ch).Allocate(req, timeout=a.timeout)
        elif a.rpc == "podresources-list":
            r = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=a.timeout)
        elif a.rpc == "podresources-allocatable":
            r = pr_grpc.PodResourcesListerStub(ch).GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=a.timeout)
        elif a.rpc == "register":
            req = dp.RegisterRequest(version=a.version, endpoint=a.endpoint, resource_name=a.resource)
            r = dp_grpc.RegistrationStub(ch).Register(req, timeout=a.timeout)
        else:
            raise SystemExit("unknown rpc %r" % a.rpc)
        emit("ok", rpc=a.rpc, response=as_dict(r))
        return 0
    except grpc.RpcError as e:
        emit("error", rpc=a.rpc, **rpc_error(e))
        return 1
    except grpc.FutureTimeoutError:
        emit("error", rpc=a.rpc, code="CONNECT_TIMEOUT", details="could not connect")
        return 1
    finally:
        ch.close()


# ---------------------------------------------------------------- plugin

class Plugin(dp_grpc.DevicePluginServicer):
    def __init__(self, a):
        self.a = a
        self.devices = [
            dp.Device(ID="dev-%d" % i, health="Healthy", topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=i % 2)]))
            for i in range(a.devices)
        ]
        self.stop = threading.Event()

    def GetDevicePluginOptions(self, request, context):
        return dp.DevicePluginOptions(pre_start_required=self.a.pre_start, get_preferred_allocation_available=True)

    def ListAndWatch(self, request, context):
        yield dp.ListAndWatchResponse(devices=self.devices)
        while not self.stop.wait(0.2) and context.is_active():
            pass

    def GetPreferredAllocation(self, request, context):
        out = []
        for c in request.container_requests:
            ids = list(c.must_include_deviceIDs)
            ids += [d for d in c.available_deviceIDs if d not in ids]
            out.append(dp.ContainerPreferredAllocationResponse(deviceIDs=ids[: c.allocation_size]))
        return dp.PreferredAllocationResponse(container_responses=out)

    def Allocate(self, request, context):
        known = {d.ID for d in self.devices}
        out = []
        for c in request.container_requests:
            for i in c.devices_ids:
                if i not in known:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown device %s" % i)
            out.append(dp.ContainerAllocateResponse(envs={"PEER_DEVICES": ",".join(c.devices_ids)}))
        return dp.AllocateResponse(container_responses=out)

    def PreStartContainer(self, request, context):
        return dp.PreStartContainerResponse()


def cmd_plugin(a):
    plugin = Plugin(a)
    sock = os.path.join(a.dir, a.endpoint)
    ksock = os.path.join(a.dir, "kubelet.sock")
    state = {"server": None}

    def serve():
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        dp_grpc.add_DevicePluginServicer_to_server(plugin, server)
        server.add_insecure_port("unix://" + sock)
        server.start()
        state["server"] = server
        emit("serving", socket=sock)

    def register():
        ch = channel(ksock, a.authority)
        try:
            grpc.channel_ready_future(ch).result(timeout=10)
            req = dp.RegisterRequest(version="v1beta1", endpoint=a.endpoint, resource_name=a.resource,
                                     options=dp.DevicePluginOptions(pre_start_required=a.pre_start,
                                                                    get_preferred_allocation_available=True))
            dp_grpc.RegistrationStub(ch).Register(req, timeout=15)
            emit("registered", resource=a.resource)
        except (grpc.RpcError, grpc.FutureTimeoutError) as e:
            emit("register_failed", **(rpc_error(e) if isinstance(e, grpc.RpcError) else {"code": "CONNECT_TIMEOUT"}))
        finally:
            ch.close()

    def shutdown(*_):
        plugin.stop.set()
        state["server"].stop(0)
        try:
            os.unlink(sock)
        except FileNotFoundError:
            pass
        sys.exit(0)

    def identity(path):
        # The inode alone is not enough: a re-created kubelet.sock often gets
        # the inode just freed by the old one.
        try:
            st = os.stat(path)
            return (st.st_ino, st.st_ctime_ns)
        except FileNotFoundError:
            return None

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    serve()
    known = identity(ksock)
    lost = False
    if not a.no_register:
        register()
    deadline = time.monotonic() + a.run_seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if a.no_register:
            continue
        # A kubelet restart deletes our socket and creates a new kubelet.sock:
        # serve again, then register again, as the upstream stub plugin does.
        if not os.path.exists(sock):
            # Wait for the old server to be gone: grpc-core unlinks a unix
            # listener's path on shutdown, which would remove the new socket.
            state["server"].stop(0).wait(5)
            serve()
            lost = True
        now = identity(ksock)
        if now is not None and (now != known or lost):
            known = now
            lost = False
            register()
    shutdown()


# ---------------------------------------------------------------- kubelet

class Registration(dp_grpc.RegistrationServicer):
    def __init__(self, a):
        self.a = a
        self.done = threading.Event()
        self.result = {}

    def Register(self, request, context):
        emit("register_request", request=as_dict(request))
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.UNKNOWN, "unsupported version %r" % request.version)
        sock = os.path.join(self.a.dir, request.endpoint)
        ch = channel(sock, self.a.authority)
        try:
            grpc.channel_ready_future(ch).result(timeout=10)
            stub = dp_grpc.DevicePluginStub(ch)
            opts = stub.GetDevicePluginOptions(dp.Empty(), timeout=10)
        except Exception as e:  # noqa: BLE001
            context.abort(grpc.StatusCode.UNKNOWN, "failed to dial device plugin: %s" % e)
        threading.Thread(target=self.session, args=(ch, stub, opts, request), daemon=True).start()
        return dp.Empty()

    def session(self, ch, stub, opts, request):
        try:
            stream = stub.ListAndWatch(dp.Empty())
            first = next(iter(stream))
            devices = [as_dict(d) for d in first.devices]
            healthy = [d.ID for d in first.devices if d.health == "Healthy"][: self.a.count]
            emit("list_and_watch", devices=devices)
            alloc = stub.Allocate(dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=healthy)]),
                                  timeout=10)
            emit("allocated", devices_ids=healthy, response=as_dict(alloc))
            if opts.pre_start_required:
                stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=healthy), timeout=30)
                emit("pre_started", devices_ids=healthy)
            stream.cancel()
        except grpc.RpcError as e:
            emit("error", **rpc_error(e))
        finally:
            ch.close()
            self.done.set()


def cmd_kubelet(a):
    reg = Registration(a)
    sock = os.path.join(a.dir, "kubelet.sock")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    dp_grpc.add_RegistrationServicer_to_server(reg, server)
    server.add_insecure_port("unix://" + sock)
    server.start()
    emit("serving", socket=sock)
    ok = reg.done.wait(a.timeout)
    server.stop(0)
    try:
        os.unlink(sock)
    except FileNotFoundError:
        pass
    emit("done", ok=ok)
    return 0 if ok else 1


# ---------------------------------------------------------------- podresources

class PodResources(pr_grpc.PodResourcesListerServicer):
    def __init__(self, data):
        self.pods = json_format.ParseDict({"pod_resources": data.get("pod_resources", [])}, pr.ListPodResourcesResponse())
        self.alloc = json_format.ParseDict(data.get("allocatable", {}), pr.AllocatableResourcesResponse())

    def List(self, request, context):
        return self.pods

    def GetAllocatableResources(self, request, context):
        return self.alloc

    def Get(self, request, context):
        for p in self.pods.pod_resources:
            if p.name == request.pod_name and p.namespace == request.pod_namespace:
                return pr.GetPodResourcesResponse(pod_resources=p)
        context.abort(grpc.StatusCode.UNKNOWN, "pod %s in namespace %s not found" % (request.pod_name, request.pod_namespace))


def cmd_podresources(a):
    with open(a.data) as f:
        data = json.load(f)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pr_grpc.add_PodResourcesListerServicer_to_server(PodResources(data), server)
    server.add_insecure_port("unix://" + a.socket)
    server.start()
    emit("serving", socket=a.socket)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    time.sleep(a.run_seconds)
    server.stop(0)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("call")
    c.add_argument("--socket", required=True)
    c.add_argument("--authority", default="localhost")
    c.add_argument("--rpc", required=True)
    c.add_argument("--devices", default="")
    c.add_argument("--version", default="v1beta1")
    c.add_argument("--endpoint", default="")
    c.add_argument("--resource", default="")
    c.add_argument("--timeout", type=float, default=10.0)
    p = sub.add_parser("plugin")
    # Like a vendor's plugin built on the kubelet's API constants: the standard directory by default.
    p.add_argument("--dir", default="/var/lib/kubelet/device-plugins")
    p.add_argument("--resource", default="example.com/peer")
    p.add_argument("--endpoint", default="peer.sock")
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--pre-start", action="store_true")
    p.add_argument("--authority", default="localhost")
    p.add_argument("--no-register", action="store_true")
    p.add_argument("--run-seconds", type=float, default=60.0)
    k = sub.add_parser("kubelet")
    k.add_argument("--dir", required=True)
    k.add_argument("--authority", default="localhost")
    k.add_argument("--count", type=int, default=1)
    k.add_argument("--timeout", type=float, default=20.0)
    r = sub.add_parser("podresources")
    r.add_argument("--socket", required=True)
    r.add_argument("--data", required=True, help="proto JSON: {pod_resources: [...], allocatable: {...}}")
    r.add_argument("--run-seconds", type=float, default=60.0)
    a = ap.parse_args()
    cmds = {"call": cmd_call, "plugin": cmd_plugin, "kubelet": cmd_kubelet, "podresources": cmd_podresources}
    return cmds[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
