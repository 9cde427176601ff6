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
- apiGroups: ["concurrency.dev"]
  resources: ["concurrencyexperiments"]
  {{- if .Values.uninstall.drainExperiments }}
  # delete: only for the uninstall hook (`drain`), which runs as this ServiceAccount.
  verbs: ["get", "list", "watch", "patch", "update", "delete"]
  {{- else }}
  verbs: ["get", "list", "watch", "patch", "update"]
  {{- end }}
# get on the experiment's own namespace (a Role grants it for its namespace): a deleted
# experiment in a terminating namespace lets go at once, there is nothing left to restore.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get"]
- apiGroups: ["concurrency.dev"]
  resources: ["concurrencyexperiments/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["concurrency.dev"]
  resources: ["concurrencyexperiments/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["get", "list", "watch"]
# The target's HPA is only read: the split works around it.
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch"]
# list only: the pods of a candidate that is not ready, to say why (CrashLoopBackOff, …).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# get only: the ConfigMaps the target's app container takes its server variables from.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["httproutes"]
  verbs: ["get", "list", "watch", "patch", "update"]
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
