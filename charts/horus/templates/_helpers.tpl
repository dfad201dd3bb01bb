{{/*
Labels of every object of component `.component` (operator, agent, admission): exactly those of
manifests/, plus .Values.commonLabels. Selectors use horus.selectorLabels, which never changes.
Call: include "horus.labels" (dict "root" $ "component" "operator")
*/}}
{{- define "horus.selectorLabels" -}}
app.kubernetes.io/name: horus
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{- define "horus.labels" -}}
{{ include "horus.selectorLabels" . }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* <registry>/<repository>:<tag> or <registry>/<repository>@<digest>. */}}
{{- define "horus.image" -}}
{{- $image := .Values.image -}}
{{- with $image.registry }}{{ trimSuffix "/" . }}/{{ end -}}
{{- $image.repository -}}
{{- if $image.digest }}@{{ $image.digest }}{{ else }}:{{ $image.tag | default .Chart.AppVersion }}{{ end -}}
{{- end }}

{{- define "horus.operatorNamespace" -}}
{{ .Values.namespaces.operator.name }}
{{- end }}

{{- define "horus.agentNamespace" -}}
{{ .Values.namespaces.agent.name }}
{{- end }}

{{/*
The components that export Prometheus metrics, as a list of dicts (component, namespace, port):
the one place the metrics templates read. The operator, and the node agent where it is enabled.
*/}}
{{- define "horus.metricsEndpoints" -}}
{{- $endpoints := list (dict "component" "operator" "namespace" (include "horus.operatorNamespace" .) "port" .Values.operator.metricsPort) -}}
{{- if .Values.agent.enabled -}}
{{- $endpoints = append $endpoints (dict "component" "agent" "namespace" (include "horus.agentNamespace" .) "port" .Values.agent.metricsPort) -}}
{{- end -}}
{{- toJson $endpoints -}}
{{- end }}

{{/* Prometheus scrape annotations for a pod exporting metrics on port `.port` (when metrics.enabled). */}}
{{- define "horus.scrapeAnnotations" -}}
{{- if .root.Values.metrics.enabled }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | toString | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end }}

{{/* The pod webhook's Service name, as the API server and the serving certificate know it. */}}
{{- define "horus.webhookHost" -}}
horus-webhook.{{ include "horus.operatorNamespace" . }}.svc
{{- end }}

{{/* The Secret holding the pod webhook's tls.crt and tls.key, which the operator mounts. */}}
{{- define "horus.webhookSecretName" -}}
{{ .Values.podRoute.certificate.existingSecret | default "horus-webhook-tls" }}
{{- end }}

{{/*
The chart-made webhook certificate, as the Secret's data (base64 ca.crt, tls.crt, tls.key; YAML, for
fromYaml). On an upgrade, the Secret already there: a new CA would change the caBundle with every
upgrade, and the API server would distrust the replicas still serving the old certificate until they
re-read the Secret. Otherwise (a first install; `helm template` and `helm lint`, which reach no
cluster) a new self-signed CA and a serving certificate it signs for the Service's names. Include it
once per template: each call without a Secret makes a new CA.
*/}}
{{- define "horus.webhookCertificate" -}}
{{- $secret := lookup "v1" "Secret" (include "horus.operatorNamespace" .) "horus-webhook-tls" -}}
{{- $data := dig "data" dict $secret -}}
{{- if and (index $data "ca.crt") (index $data "tls.crt") (index $data "tls.key") -}}
{{- pick $data "ca.crt" "tls.crt" "tls.key" | toYaml -}}
{{- else -}}
{{- $days := int .Values.podRoute.certificate.validityDays -}}
{{- $host := include "horus.webhookHost" . -}}
{{- $ca := genCA "horus-webhook-ca" $days -}}
{{- $cert := genSignedCert $host nil (list $host (printf "%s.cluster.local" $host)) $days $ca -}}
{{- dict "ca.crt" ($ca.Cert | b64enc) "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) | toYaml -}}
{{- end -}}
{{- end }}
