-- Argo CD health check for Horus DLJobs (horus.dev/v1alpha1, kind DLJob); docs/operator.md, "Health for
-- GitOps tools". Install it as `resource.customizations.health.horus.dev_DLJob` in argocd-cm
-- (manifests/argocd/argocd-cm-dljob-health.yaml holds the same script in that form).
--
--   Queued, Scheduled (Reconciling True)   -> Progressing
--   Running, Succeeded (Ready True)        -> Healthy
--   Failed (Stalled True, with its reason) -> Degraded
--
-- Argo CD runs checks from argocd-cm without Lua's string, math and os libraries: only the base and
-- table libraries and the language itself are used here.
local hs = {}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Horus operator to see the job"
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the Horus operator to see generation " .. tostring(generation)
  return hs
end

local message = status.message or ""
local stalled = condition(status, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = tostring(stalled.reason) .. ": " .. (stalled.message or message)
  return hs
end
local reconciling = condition(status, "Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = status.phase .. ": " .. message
  return hs
end
local ready = condition(status, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = status.phase .. ": " .. message
  return hs
end

-- Written by an operator older than the health conditions: the phase alone.
if status.phase == "Failed" then
  hs.status = "Degraded"
elseif status.phase == "Running" or status.phase == "Succeeded" then
  hs.status = "Healthy"
else
  hs.status = "Progressing"
end
hs.message = status.phase .. ": " .. message
return hs
