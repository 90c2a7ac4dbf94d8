package main

// The machine the kubelet's managers see, as cadvisor would describe it:
// --numa-nodes nodes, each its own socket of --cpus-per-numa cores with
// one thread each, node n holding CPUs n*cpus-per-numa and up (as
// dpctl kubelet-sim numbers them), 16 GiB of memory per node.

const memoryPerNode = 16 << 30

func buildMachine(cfg refConfig) *machineInfo {
	mi := &machineInfo{
		NumCores:         cfg.numaNodes * cfg.cpusPerNuma,
		NumPhysicalCores: cfg.numaNodes * cfg.cpusPerNuma,
		NumSockets:       cfg.numaNodes,
		MemoryCapacity:   uint64(cfg.numaNodes) * memoryPerNode,
	}
	for n := 0; n < cfg.numaNodes; n++ {
		node := cadvNode{Id: n, Memory: memoryPerNode}
		for c := n * cfg.cpusPerNuma; c < (n+1)*cfg.cpusPerNuma; c++ {
			node.Cores = append(node.Cores, cadvCore{Id: c, Threads: []int{c}, SocketID: n})
		}
		if cfg.distances != nil {
			node.Distances = cfg.distances[n]
		}
		mi.Topology = append(mi.Topology, node)
	}
	return mi
}
