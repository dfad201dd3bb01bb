"""What the node agents observe: their GPUNodes read (`gpunodes`), each job's observed status computed
(`observed`, pure) and written by the leader (`updates`), observed co-locations kept (`store`), the online
correction taught and saved (`learning`), and the GPUNode watch (`handlers`)."""
