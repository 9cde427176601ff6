{{- define "cop.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cop.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cop.labels" -}}
app.kubernetes.io/name: {{ include "cop.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cop.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cop.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The rules the operator needs in a namespace it watches. No Secrets, no wildcards. */}}
{{- define "cop.namespacedRules" -}}
# Exactly what the code calls: src/rbac/mod.rs (OPERATOR) declares each rule and why, the
# mocked-API tests refuse any other call, and scripts/helm-check compares these with it.
- apiGroups: ["concurrency.dev"]
  resources: ["concurrencyexperiments"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["concurrency.dev"]
  resources: ["concurrencyexperiments/status"]
  verbs: ["patch"]
# No call: the API server requires it to set blockOwnerDeletion on what an experiment owns.
- apiGroups: ["concurrency.dev"]
  resources: ["concurrencyexperiments/finalizers"]
  verbs: ["update"]
# get on the experiment's own namespace (a Role grants it for its namespace): a deleted
# experiment in a terminating namespace lets go at once, there is nothing left to restore.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get"]
# get: a target the cache holds metadata-only (its last event came before its experiment);
# create: a server-side apply that creates the candidate; patch: it and the target's replicas
# and template; delete: the experiment's own variants (never the target).
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["list"]
# The target's HPA is only read: the split works around it.
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["list", "watch"]
# list only: the candidate's pods, for restarts and why one is not ready (CrashLoopBackOff, …).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["list", "create", "patch", "delete"]
# get only: the ConfigMaps the target's app container takes its server variables from.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["httproutes"]
  verbs: ["get", "patch"]
# gatewayAPI: a variant Service joins the route only once its EndpointSlices have a ready
# endpoint (a Gateway answers 500 for a backendRef it cannot resolve yet).
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["list"]
# Only at 100 % with the replicas router and an HPA on the target: the candidate's pods' usage,
# to apply the HPA's rule to them while the target is at 0 (where its HPA does not act).
- apiGroups: ["metrics.k8s.io"]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/* Prometheus providers (docs/operations.md). Secrets are mounted whole, one directory per
     Secret, under this path; the configuration file names the files in them. */}}
{{- define "cop.prometheusSecretDir" -}}/etc/concurrency-operator/prometheus-secrets{{- end -}}

{{/* One provider of the configuration file from its Helm values: {p, dir}. */}}
{{- define "cop.prometheusProvider" -}}
{{- $p := .p -}}
{{- $dir := .dir -}}
{{- $out := dict -}}
{{- with $p.url }}{{ $_ := set $out "url" . }}{{ end -}}
{{- with $p.bearerTokenSecret }}{{ if .name }}{{ $_ := set $out "bearerTokenFile" (printf "%s/%s/%s" $dir .name (.key | default "token")) }}{{ end }}{{ end -}}
{{- with $p.basicAuthSecret }}{{ if .name }}{{ $_ := set $out "basicAuth" (dict "usernameFile" (printf "%s/%s/%s" $dir .name (.usernameKey | default "username")) "passwordFile" (printf "%s/%s/%s" $dir .name (.passwordKey | default "password"))) }}{{ end }}{{ end -}}
{{- $tls := dict -}}
{{- with $p.caSecret }}{{ if .name }}{{ $_ := set $tls "caFile" (printf "%s/%s/%s" $dir .name (.key | default "ca.crt")) }}{{ end }}{{ end -}}
{{- with $p.serverName }}{{ $_ := set $tls "serverName" . }}{{ end -}}
{{- if $p.insecureSkipVerify }}{{ $_ := set $tls "insecureSkipVerify" true }}{{ end -}}
{{- if $tls }}{{ $_ := set $out "tls" $tls }}{{ end -}}
{{- with $p.headers }}{{ $_ := set $out "headers" . }}{{ end -}}
{{- with $p.namespaces }}{{ $_ := set $out "namespaces" . }}{{ end -}}
{{- with $p.urls }}{{ $_ := set $out "urls" . }}{{ end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The operator's Prometheus configuration file; empty when nothing is configured. */}}
{{- define "cop.prometheusConfig" -}}
{{- $dir := include "cop.prometheusSecretDir" . -}}
{{- $pr := .Values.prometheus -}}
{{- $c := dict -}}
{{- if $pr.default.url -}}
{{- $_ := set $c "default" (include "cop.prometheusProvider" (dict "p" $pr.default "dir" $dir) | fromYaml) -}}
{{- end -}}
{{- $creds := dict -}}
{{- range $name, $p := $pr.credentials -}}
{{- $_ := set $creds $name (include "cop.prometheusProvider" (dict "p" $p "dir" $dir) | fromYaml) -}}
{{- end -}}
{{- if $creds }}{{ $_ := set $c "credentials" $creds }}{{ end -}}
{{- with $pr.allowedUrls }}{{ $_ := set $c "allowedUrls" . }}{{ end -}}
{{- if $c }}{{ toYaml $c }}{{ end -}}
{{- end -}}

{{/* The Secrets the providers name, sorted and comma separated. */}}
{{- define "cop.prometheusSecrets" -}}
{{- $names := dict -}}
{{- range $p := prepend (values .Values.prometheus.credentials) .Values.prometheus.default -}}
{{- range $k := list "bearerTokenSecret" "basicAuthSecret" "caSecret" -}}
{{- with (get $p $k) }}{{ if .name }}{{ $_ := set $names .name true }}{{ end }}{{ end -}}
{{- end -}}
{{- end -}}
{{- keys $names | sortAlpha | join "," -}}
{{- end -}}

{{/* The uninstall hook's own ServiceAccount and role: created just before its Job, gone after. */}}
{{- define "cop.drainHook" }}
    helm.sh/hook: pre-delete
    helm.sh/hook-weight: "-1"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}
