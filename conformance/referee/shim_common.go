package main

// API glue that reads the same in every release built (the rest is in
// shim_k8s_1_NN.go and the two files below).

import (
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The kubelet's default CPUManagerReconcilePeriod (10s).
const cpuReconcilePeriod = 10e9

// passThrough is the admission-failure handler for pods that are not
// critical (the referee's pods never are): the reasons stand.
type passThrough struct{}

func (p devicesProvider) GetDevices(uid, name string) []*podresourcesv1.ContainerDevices {
	return containerDevices(p.m.dm.GetDevices(uid, name))
}

func (p cpusProvider) GetAllocatableCPUs() []int64 {
	return int64s(p.m.cpu.GetAllocatableCPUs().UnsortedList())
}
