// Marks conformance/cluster as a module root only. conformance/cluster.sh
// builds it with a copy of conformance/referee/modfiles/1.NN.mod
// (-modfile), so etcd and the control plane come at the versions the
// referee and the kubelet of that release pin; this file is never read.
module dpctl/conformance/cluster

go 1.24.0
