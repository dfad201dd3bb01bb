"""DRA binding: the ResourceClaims Horus owns for DRA-bound jobs (`claims`: pure decisions; `keeper`: kept
as the decisions say), the GPUs NVIDIA's DRA driver publishes (`slices`) and their watches (`handlers`)."""
